//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kubetypes"
)

// vmstatOOMKills is the kernel's count of OOM kills since boot.
func vmstatOOMKills(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/vmstat")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "oom_kill "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("this kernel has no oom_kill counter in /proc/vmstat")
	return 0
}

// oomControl reads a v1 memory cgroup's memory.oom_control counters.
func oomControl(dir string) (oomKill, underOOM uint64, err error) {
	b, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, " ")
		n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch k {
		case "oom_kill":
			oomKill = n
		case "under_oom":
			underOOM = n
		}
	}
	return oomKill, underOOM, nil
}

func evictionTestPod(name, image string, res v1.ResourceList, command string) *v1.Pod {
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)),
			Annotations: map[string]string{"kubernetes.io/config.source": kubetypes.SourceAPI},
		},
		Spec: v1.PodSpec{
			NodeName: nodeName, HostNetwork: true, DNSPolicy: v1.DNSDefault, RestartPolicy: v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "main", Image: image, Command: []string{"sh", "-c", command},
				Resources: v1.ResourceRequirements{Requests: res, Limits: res},
			}},
		},
	}
}

// hogChunks x hogChunkBytes is the most the BestEffort pod ever asks for:
// each chunk is a shell variable of 16 MiB held by a subshell (about
// 32 MiB resident: ash doubles its buffer while it reads), one more every
// second: about 900 MiB at most, far from what could make the kernel run
// out of memory, and well past the 300 MiB margin the threshold leaves.
// The subshell ends in a loop, not in sleep, which ash would exec (and so
// drop the variable).
const (
	hogChunkBytes  = 16 << 20
	hogChunks      = 28
	evictionMargin = 300 << 20
)

// TestEvictionMemoryPressure runs the in-process agent on containerd with
// the container manager (a pods cgroup of its own) and eviction over the
// cgroup stats, with a hard memory.available threshold 300 MiB below what
// the node has available when the test starts. A BestEffort pod allocates
// memory steadily; a Guaranteed pod sleeps beside it. The agent must evict
// the BestEffort pod (status Failed, reason Evicted) before the kernel's
// OOM killer fires, and leave the Guaranteed pod's container running.
func TestEvictionMemoryPressure(t *testing.T) {
	requireCgroupV1(t)
	e := volumeEnv(t)
	mgr, top := e.cgroupManager(t, "kubepods-evict-", containermgr.Config{
		SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("1Gi")},
	}, false)

	// The threshold: what the node has available now (as the agent's stats
	// will measure it) minus the margin.
	probe, err := eviction.NewCgroupStats(eviction.CgroupStatsConfig{CgroupRoot: v1Cgroups})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := probe.Summary(t.Context())
	if err != nil || sum.Memory == nil {
		t.Fatalf("reading the node's memory: %v", err)
	}
	avail := sum.Memory.AvailableBytes
	if avail < 2*evictionMargin+hogChunks*hogChunkBytes*2 {
		t.Skipf("only %d MiB available: too little to run the memory hog safely", avail>>20)
	}
	thresholdMiB := (avail - evictionMargin) >> 20
	hard, err := eviction.ParseThresholds(map[string]string{"memory.available": fmt.Sprintf("%dMi", thresholdMiB)}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("available %d MiB; hard threshold memory.available<%dMi", avail>>20, thresholdMiB)

	sets := make(chan []*v1.Pod, 1)
	statuses := newStatusSink()
	var built nodekit.EvictionParts
	root := t.TempDir()
	b := e.builder(root, "").
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))).
		WithStatusSink(statuses).
		WithPodSource(kubetypes.SourceAPI, podSets(kubetypes.SourceAPI, sets)).
		WithEvictionOptions(eviction.Config{Thresholds: hard, Interval: time.Second}, nodekit.EvictionOptions{Built: &built, MemcgNotifier: true})
	agent, err := cmwire.ContainerManager(b, mgr).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	oomBefore := vmstatOOMKills(t)
	guaranteedName, hogName := "evict-guaranteed-"+nodeName, "evict-hog-"+nodeName
	guaranteed := evictionTestPod(guaranteedName, e.busybox,
		v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		"trap 'exit 0' TERM; sleep 3600 & wait")
	hog := evictionTestPod(hogName, e.busybox, nil, fmt.Sprintf(
		`i=0; while [ $i -lt %d ]; do (x=$(head -c %d /dev/zero | tr '\0' a); echo chunk $i ${#x}; while :; do sleep 3600; done) & i=$((i+1)); sleep 1; done; wait`,
		hogChunks, hogChunkBytes))
	sets <- []*v1.Pod{guaranteed, hog}

	var guaranteedID, hogID string
	waitFor(t, 90*time.Second, "both pods running", func() (bool, string) {
		run := e.running(t)
		if c := run[guaranteedName]; c != nil {
			guaranteedID = c.Id
		}
		if c := run[hogName]; c != nil {
			hogID = c.Id
		}
		return guaranteedID != "" && hogID != "", fmt.Sprintf("guaranteed %q, hog %q", guaranteedID, hogID)
	})
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(root, "pod-logs", "*evict-hog*", "main", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("hog log %s:\n%s", l, tail(b, 2048))
			}
		}
	})
	hogCgroup := filepath.Join(v1Cgroups, "memory", top, "besteffort", "pod"+string(hog.UID), hogID)

	// The hog grows until the agent evicts it; meanwhile its container's
	// cgroup must never see the OOM killer.
	var hogOOMKills uint64
	waited := waitFor(t, 40*time.Second, "the BestEffort pod evicted", func() (bool, string) {
		if k, under, err := oomControl(hogCgroup); err == nil {
			hogOOMKills = max(hogOOMKills, k)
			if under != 0 {
				t.Errorf("the hog's cgroup is under OOM")
			}
		}
		st := statuses.get(hogName)
		s, _ := probe.Summary(t.Context())
		detail := fmt.Sprintf("hog %s/%s", st.Phase, st.Reason)
		if s != nil && s.Memory != nil {
			detail += fmt.Sprintf(", node available %d MiB", s.Memory.AvailableBytes>>20)
		}
		if b, err := os.ReadFile(filepath.Join(hogCgroup, "memory.usage_in_bytes")); err == nil {
			n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			detail += fmt.Sprintf(", hog container uses %d MiB", n>>20)
		} else {
			detail += fmt.Sprintf(", hog cgroup: %v", err)
		}
		return st.Phase == v1.PodFailed && st.Reason == eviction.Reason, detail
	})
	t.Logf("evicted %v after the pods started", waited.Round(time.Second))
	// Checked at once: on a busy machine other processes may push the node
	// back under the threshold later, and the Guaranteed pod would then be
	// the next (and rightly so) to go.
	if c := e.running(t)[guaranteedName]; c == nil || c.Id != guaranteedID {
		t.Fatalf("the Guaranteed pod's container when the hog was evicted: %v, want %s running", c, guaranteedID)
	}

	st := statuses.get(hogName)
	if !strings.Contains(st.Message, "The node was low on resource: memory.") {
		t.Errorf("eviction message %q", st.Message)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Terminated != nil && cs.State.Terminated.Reason == "OOMKilled" {
			t.Errorf("the hog's container was OOM-killed: %+v", cs.State.Terminated)
		}
	}
	if hogOOMKills != 0 {
		t.Errorf("memory.oom_control of the hog's container says oom_kill %d", hogOOMKills)
	}
	if after := vmstatOOMKills(t); after != oomBefore {
		t.Errorf("the kernel OOM killer fired %d times during the test", after-oomBefore)
	}
	if !built.Manager.IsUnderMemoryPressure() {
		t.Error("the eviction manager reports no MemoryPressure after a memory eviction")
	}

	// The Guaranteed pod runs on, in the same container.
	waitFor(t, 30*time.Second, "the hog's container gone", func() (bool, string) {
		return e.running(t)[hogName] == nil, "still running"
	})
	if c := e.running(t)[guaranteedName]; c == nil || c.Id != guaranteedID {
		t.Fatalf("the Guaranteed pod's container: %v, want %s still running", c, guaranteedID)
	}
	if gs := statuses.get(guaranteedName); gs.Phase != v1.PodRunning {
		t.Errorf("the Guaranteed pod's phase %s (%s: %s), want Running", gs.Phase, gs.Reason, gs.Message)
	}
	if k, _, err := oomControl(filepath.Join(v1Cgroups, "memory", top, "pod"+string(guaranteed.UID), guaranteedID)); err != nil || k != 0 {
		t.Errorf("the Guaranteed container's oom_kill %d (%v)", k, err)
	}
}
