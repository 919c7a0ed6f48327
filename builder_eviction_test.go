package nodekit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
)

const evMiB = 1 << 20

// evictionSource is a pod source the test drives: every set() is sent as a SET.
type evictionSource struct {
	out  chan<- kubetypes.PodUpdate
	sets chan []*v1.Pod
}

func (s *evictionSource) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.sets:
			select {
			case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.SourceAPI}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// memoryStats is a node whose memory is used by the pods running in the
// fake runtime: each running pod uses what usage says; memory comes back
// when its containers stop.
type memoryStats struct {
	rt       *fake.Runtime
	capacity uint64
	mu       sync.Mutex
	usage    map[types.UID]uint64
}

func (s *memoryStats) setUsage(uid types.UID, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.usage[uid] = bytes
}

func (s *memoryStats) Summary(ctx context.Context) (*eviction.Summary, error) {
	cs, err := s.rt.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	running := map[types.UID]bool{}
	for _, c := range cs {
		running[types.UID(c.Labels[kuberuntime.LabelPodUID])] = true
	}
	sum := &eviction.Summary{}
	var used uint64
	for uid, u := range s.usage {
		if !running[uid] {
			continue
		}
		used += u
		sum.Pods = append(sum.Pods, eviction.PodStats{UID: uid, MemoryWorkingSetBytes: u})
	}
	sum.Memory = &eviction.MemoryStats{AvailableBytes: s.capacity - used, WorkingSetBytes: used}
	return sum, nil
}

func evictionPod(name string, res v1.ResourceList) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid"),
			Annotations: map[string]string{"kubernetes.io/config.source": kubetypes.SourceAPI}},
		Spec: v1.PodSpec{
			HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "main", Image: "busybox:1", Command: []string{"sh", "-c", agenttest.Forever},
				Resources: v1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
}

// TestWithEviction: under memory pressure the agent evicts the BestEffort
// pod (its status: Failed, Evicted, the kubelet's message, a
// DisruptionTarget condition) and keeps the Guaranteed one running (same
// container); the pressure lingers, so a new BestEffort pod is rejected at
// admission while a Burstable one runs.
func TestWithEviction(t *testing.T) {
	defer goleak.VerifyNone(t)
	rt, err := fake.New(fake.Config{Images: []string{"busybox:1"}})
	if err != nil {
		t.Fatal(err)
	}
	stats := &memoryStats{rt: rt, capacity: 1024 * evMiB, usage: map[types.UID]uint64{}}
	guaranteed := evictionPod("guaranteed", v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")})
	besteffort := evictionPod("besteffort", nil)
	stats.setUsage(guaranteed.UID, 32*evMiB)
	stats.setUsage(besteffort.UID, 100*evMiB)

	hard, err := eviction.ParseThresholds(map[string]string{"memory.available": "500Mi"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &evictionSource{sets: make(chan []*v1.Pod, 4)}
	sink := agenttest.NewNameSink()
	var built nodekit.EvictionParts
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithRuntime(rt).
		WithLogger(zaptest.NewLogger(t)).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithPodSource(kubetypes.SourceAPI, func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			src.out = out
			return src, nil
		}).
		WithEvictionOptions(eviction.Config{
			Thresholds: hard, Stats: stats, Interval: 50 * time.Millisecond,
		}, nodekit.EvictionOptions{Built: &built}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if built.Manager == nil || built.ImageGC == nil {
		t.Fatalf("Built = %+v: want the eviction manager and an image GC over the fake runtime", built)
	}
	if agent.Eviction() != built.Manager {
		t.Fatal("Agent.Eviction is not the manager WithEvictionOptions built")
	}
	pressure := agent.Pressure()
	stop := agenttest.StartAgent(t, agent)
	src.sets <- []*v1.Pod{guaranteed, besteffort}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "both pods Running", func() (bool, string) {
		p := sink.Phases()
		return p["guaranteed"] == v1.PodRunning && p["besteffort"] == v1.PodRunning, ""
	})
	if built.Manager.IsUnderMemoryPressure() {
		t.Fatal("memory pressure with 892Mi available and a 500Mi threshold")
	}
	before := runningContainers(t, rt)

	// The BestEffort pod grows: 1024 - 32 - 600 = 392Mi available < 500Mi.
	stats.setUsage(besteffort.UID, 600*evMiB)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "the BestEffort pod evicted", func() (bool, string) {
		st, _ := sink.Status("besteffort")
		return st.Phase == v1.PodFailed && st.Reason == eviction.Reason, string(st.Phase) + " " + st.Reason
	})
	st, _ := sink.Status("besteffort")
	if !strings.Contains(st.Message, "The node was low on resource: memory. Threshold quantity: 500Mi") {
		t.Errorf("eviction message %q", st.Message)
	}
	disruption := false
	for _, c := range st.Conditions {
		disruption = disruption || (c.Type == v1.DisruptionTarget && c.Status == v1.ConditionTrue)
	}
	if !disruption {
		t.Errorf("no DisruptionTarget condition in %+v", st.Conditions)
	}
	if !built.Manager.IsUnderMemoryPressure() {
		t.Error("no MemoryPressure after an eviction for memory")
	}
	if !pressure.IsUnderMemoryPressure() || pressure.IsUnderDiskPressure() || pressure.IsUnderPIDPressure() {
		t.Error("Agent.Pressure does not report the eviction manager's memory pressure (alone)")
	}
	after := runningContainers(t, rt)
	if after["guaranteed"] == "" || after["guaranteed"] != before["guaranteed"] {
		t.Fatalf("the Guaranteed pod's container %q before, %q after: want it untouched", before["guaranteed"], after["guaranteed"])
	}
	if _, ok := after["besteffort"]; ok {
		t.Fatal("the evicted pod's container still runs")
	}

	// MemoryPressure lingers for the transition period: a new BestEffort
	// pod is rejected, a Burstable one runs.
	late := evictionPod("late-besteffort", nil)
	burstable := evictionPod("burstable", nil)
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi")}
	src.sets <- []*v1.Pod{guaranteed, besteffort, late, burstable}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "late BestEffort rejected, Burstable Running", func() (bool, string) {
		p := sink.Phases()
		return p["late-besteffort"] == v1.PodFailed && p["burstable"] == v1.PodRunning, string(p["late-besteffort"]) + " " + string(p["burstable"])
	})
	rej, _ := sink.Status("late-besteffort")
	if rej.Reason != eviction.Reason || !strings.Contains(rej.Message, "The node had condition: [MemoryPressure]") {
		t.Errorf("rejection %q: %q", rej.Reason, rej.Message)
	}
	if got := runningContainers(t, rt)["guaranteed"]; got != before["guaranteed"] {
		t.Errorf("the Guaranteed pod's container changed to %q", got)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWithEvictionNeedsStats: with neither Stats nor a container manager,
// Build says Stats is required; a bad eviction Config is reported by
// Build naming the field.
func TestWithEvictionNeedsStats(t *testing.T) {
	_, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime().
		WithRootDir(t.TempDir()).
		WithEviction(eviction.Config{}).
		Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "Stats is required") {
		t.Fatalf("Build = %v", err)
	}
	// Without WithEviction an agent reports no pressure.
	plain, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).Build()
	if err != nil {
		t.Fatal(err)
	}
	if p := plain.Pressure(); plain.Eviction() != nil || p.IsUnderMemoryPressure() || p.IsUnderDiskPressure() || p.IsUnderPIDPressure() {
		t.Error("an agent without eviction reports an eviction manager or pressure")
	}
	_, err = nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime().
		WithRootDir(t.TempDir()).
		WithEviction(eviction.Config{Stats: eviction.NewFakeStats(nil), Interval: -time.Second}).
		Build()
	if !errors.Is(err, eviction.ErrInvalidConfig) || !strings.Contains(err.Error(), "Interval") {
		t.Fatalf("Build = %v", err)
	}
}

// writeCgroupFiles writes the v1 memory files CgroupStats reads into an
// emulated hierarchy directory.
func writeCgroupFiles(t *testing.T, dir string, usage uint64) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"memory.usage_in_bytes": strconv.FormatUint(usage, 10),
		"memory.stat":           "total_inactive_file 0\n",
		"cgroup.procs":          "",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func procMemTotal(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Skipf("no /proc/meminfo: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseUint(f[0], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Skip("no MemTotal")
	return 0
}

// TestWithEvictionDefaultStats: with a container manager (an emulated v1
// hierarchy in a temp dir) and no Stats, the eviction manager reads
// CgroupStats over the manager's pods cgroup: node memory from the root
// memory cgroup, pod usage from the pod cgroups. The BestEffort pod is
// evicted when the node's working set crosses the threshold.
func TestWithEvictionDefaultStats(t *testing.T) {
	defer goleak.VerifyNone(t)
	memTotal := procMemTotal(t)
	cgroupRoot := t.TempDir()
	for _, c := range []string{"cpu", "memory"} {
		if err := os.Mkdir(filepath.Join(cgroupRoot, c), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	memRoot := filepath.Join(cgroupRoot, "memory")
	writeCgroupFiles(t, memRoot, memTotal/4) // 3/4 available
	cm, err := containermgr.New(containermgr.Config{
		CgroupRoot:    cgroupRoot,
		CgroupVersion: containermgr.V1,
		Capacity:      v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: *resource.NewQuantity(int64(memTotal), resource.BinarySI)},
	})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := fake.New(fake.Config{Images: []string{"busybox:1"}})
	if err != nil {
		t.Fatal(err)
	}
	guaranteed := evictionPod("guaranteed", v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")})
	besteffort := evictionPod("besteffort", nil)
	hard, err := eviction.ParseThresholds(map[string]string{"memory.available": "50%"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &evictionSource{sets: make(chan []*v1.Pod, 4)}
	sink := agenttest.NewNameSink()
	var built nodekit.EvictionParts
	root := t.TempDir()
	b := nodekit.NewBuilder().
		WithNodeName("node1").
		WithRuntime(rt).
		WithRootDir(root).
		WithStatusSink(sink).
		WithPodSource(kubetypes.SourceAPI, func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			src.out = out
			return src, nil
		}).
		WithEvictionOptions(eviction.Config{Thresholds: hard, Interval: 50 * time.Millisecond}, nodekit.EvictionOptions{Built: &built})
	agent, err := cmwire.ContainerManager(b, cm).Build()
	if err != nil {
		t.Fatal(err)
	}
	stop := agenttest.StartAgent(t, agent)
	src.sets <- []*v1.Pod{guaranteed, besteffort}
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "both pods Running", func() (bool, string) {
		p := sink.Phases()
		return p["guaranteed"] == v1.PodRunning && p["besteffort"] == v1.PodRunning, ""
	})
	pods := filepath.Join(memRoot, "kubepods")
	writeCgroupFiles(t, pods, 0)
	writeCgroupFiles(t, filepath.Join(pods, "pod"+string(guaranteed.UID)), 8*evMiB)
	writeCgroupFiles(t, filepath.Join(pods, "besteffort", "pod"+string(besteffort.UID)), 100*evMiB)
	if built.Manager.IsUnderMemoryPressure() {
		t.Fatal("pressure with 3/4 of the memory available and a 50% threshold")
	}
	writeCgroupFiles(t, memRoot, memTotal/4*3) // 1/4 available
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "the BestEffort pod evicted", func() (bool, string) {
		st, _ := sink.Status("besteffort")
		return st.Phase == v1.PodFailed && st.Reason == eviction.Reason, string(st.Phase) + " " + st.Reason
	})
	if p := sink.Phases()["guaranteed"]; p != v1.PodRunning {
		t.Errorf("the Guaranteed pod is %s", p)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestWithEvictionDerivesEnforceAllocatable: with a container manager that
// limits the pods cgroup to allocatable (its default), the eviction
// manager watches allocatableMemory.available without EnforceAllocatable
// being set; with enforcement off it does not.
func TestWithEvictionDerivesEnforceAllocatable(t *testing.T) {
	for _, tc := range []struct {
		enforce []string
		want    bool
	}{{nil, true}, {[]string{containermgr.EnforcePods}, true}, {[]string{containermgr.EnforceNone}, false}} {
		cgroupRoot := t.TempDir()
		cm, err := containermgr.New(containermgr.Config{
			CgroupRoot: cgroupRoot, CgroupVersion: containermgr.V1, EnforceNodeAllocatable: tc.enforce,
			Capacity: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")},
		})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := fake.New(fake.Config{})
		if err != nil {
			t.Fatal(err)
		}
		hard, err := eviction.ParseThresholds(map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var built nodekit.EvictionParts
		if _, err := cmwire.ContainerManager(nodekit.NewBuilder().WithNodeName("node1").WithRuntime(rt).WithRootDir(t.TempDir()), cm).
			WithEvictionOptions(eviction.Config{Thresholds: hard}, nodekit.EvictionOptions{Built: &built}).
			Build(); err != nil {
			t.Fatal(err)
		}
		got := false
		for _, th := range built.Manager.Thresholds() {
			if th.Signal == eviction.SignalAllocatableMemoryAvailable {
				got = true
			}
		}
		if got != tc.want {
			t.Errorf("EnforceNodeAllocatable %v: allocatableMemory.available threshold %v, want %v (thresholds %v)", tc.enforce, got, tc.want, built.Manager.Thresholds())
		}
	}
}
