package benchmarks

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	serverstats "k8s.io/kubernetes/pkg/kubelet/server/stats"
	kubeletstats "k8s.io/kubernetes/pkg/kubelet/stats"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
	"k8s.io/kubernetes/pkg/volume"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/stats"
)

// The stats summary of /stats/summary?only_cpu_and_memory=true (what
// metrics-server and /metrics/resource read), built and encoded as JSON,
// on one fake CRI runtime (nodekit's, which has the kubelet's CRI
// interfaces) running 110 pods of two containers: nodekit's stats.Provider
// against the kubelet's summary provider over its CRI stats provider
// (PodAndContainerStatsFromCRI: pods and containers from the CRI alone;
// the node from a stub cAdvisor). Both read the same CRI data; the test
// asserts the same pods, containers and CPU times before timing.

// statsRuntime runs n pods of two containers on the fake runtime.
func statsRuntime(tb testing.TB, n int) (*fake.Runtime, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	for i := range n {
		uid, name := fmt.Sprintf("uid-%03d", i), fmt.Sprintf("pod-%03d", i)
		labels := map[string]string{kuberuntime.LabelPodUID: uid, kuberuntime.LabelPodName: name, kuberuntime.LabelPodNamespace: "default"}
		sbCfg := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
			Labels:   labels,
			Annotations: map[string]string{fake.BehaviorAnnotation("app"): "cpu=100m,memory=8Mi",
				fake.BehaviorAnnotation("sidecar"): "cpu=10m,memory=2Mi"},
		}
		sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
		if err != nil {
			tb.Fatal(err)
		}
		for _, c := range []string{"app", "sidecar"} {
			cl := map[string]string{kuberuntime.LabelContainerName: c}
			for k, v := range labels {
				cl[k] = v
			}
			id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: c}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Labels: cl,
			}, sbCfg)
			if err != nil {
				tb.Fatal(err)
			}
			if err := rt.StartContainer(ctx, id); err != nil {
				tb.Fatal(err)
			}
		}
	}
	clk.Step(10 * time.Second)
	return rt, clk
}

// rootCadvisor is a cAdvisor that knows the root cgroup only.
type rootCadvisor struct {
	cadvisortest.Fake
	at time.Time
}

func (c *rootCadvisor) ContainerInfoV2(name string, _ cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerInfo, error) {
	if name != "/" {
		return map[string]cadvisorapiv2.ContainerInfo{}, nil
	}
	st := func(t time.Time, cpu uint64) *cadvisorapiv2.ContainerStats {
		return &cadvisorapiv2.ContainerStats{Timestamp: t,
			Cpu:    &cadvisorapi.CpuStats{Usage: cadvisorapi.CpuUsage{Total: cpu}},
			Memory: &cadvisorapi.MemoryStats{Usage: 4 << 30, WorkingSet: 3 << 30, RSS: 2 << 30}}
	}
	return map[string]cadvisorapiv2.ContainerInfo{"/": {
		Spec:  cadvisorapiv2.ContainerSpec{CreationTime: c.at.Add(-time.Hour), HasCpu: true, HasMemory: true, Memory: cadvisorapiv2.MemorySpec{Limit: 8 << 30}},
		Stats: []*cadvisorapiv2.ContainerStats{st(c.at.Add(-10*time.Second), 1e12), st(c.at, 1e12+5e9)},
	}}, nil
}

// kubeletSummarySource is the part of the Kubelet the summary provider
// reads, over the kubelet's CRI stats provider.
type kubeletSummarySource struct {
	*kubeletstats.Provider
	node *v1.Node
}

func (k kubeletSummarySource) GetNode(context.Context) (*v1.Node, error) { return k.node, nil }
func (kubeletSummarySource) GetNodeConfig() cm.NodeConfig                { return cm.NodeConfig{} }
func (kubeletSummarySource) GetPodCgroupRoot() string                    { return "" }
func (kubeletSummarySource) GetPodByName(string, string) (*v1.Pod, bool) { return nil, false }
func (kubeletSummarySource) GetPodByCgroupfs(string) (*v1.Pod, bool)     { return nil, false }
func (kubeletSummarySource) GetPods() []*v1.Pod                          { return nil }
func (kubeletSummarySource) ListVolumesForPod(types.UID) (map[string]volume.Volume, bool) {
	return nil, false
}
func (kubeletSummarySource) ListBlockVolumesForPod(types.UID) (map[string]volume.BlockVolume, bool) {
	return nil, false
}

func (kubeletSummarySource) GetRequestedContainersInfo(string, cadvisorapiv2.RequestOptions) (map[string]*cadvisorapi.ContainerInfo, error) {
	return nil, nil
}

type uidTranslator struct{}

func (uidTranslator) TranslatePodUID(uid types.UID) kubetypes.ResolvedPodUID {
	return kubetypes.ResolvedPodUID(uid)
}

func kubeletSummaryProvider(rt *fake.Runtime, at time.Time) serverstats.SummaryProvider {
	ca := &rootCadvisor{at: at}
	p := kubeletstats.NewCRIStatsProvider(ca, nil, uidTranslator{}, rt, rt, nil, true, nil)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	return serverstats.NewSummaryProvider(context.Background(), kubeletSummarySource{Provider: p, node: node})
}

func nodekitSummaryProvider(tb testing.TB, rt *fake.Runtime, clk *clocktesting.FakeClock) *stats.Provider {
	mgr, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: rt, Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := stats.New(stats.Config{NodeName: "node-1", Runtime: rt, Pods: mgr, Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// cpuByContainer is each container's CPU time, by pod UID and name.
func cpuByContainer(s *statsapi.Summary) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.CPU != nil && c.CPU.UsageCoreNanoSeconds != nil {
				out[p.PodRef.UID+"/"+c.Name] = *c.CPU.UsageCoreNanoSeconds
			}
		}
	}
	return out
}

func TestSummarySameOnBothSides(t *testing.T) {
	rt, clk := statsRuntime(t, 110)
	ku, err := kubeletSummaryProvider(rt, clk.Now()).GetCPUAndMemoryStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	nk, err := nodekitSummaryProvider(t, rt, clk).Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	kc, nc := cpuByContainer(ku), cpuByContainer(nk)
	if len(ku.Pods) != 110 || len(nk.Pods) != 110 || len(kc) != 220 || len(nc) != 220 {
		t.Fatalf("pods kubelet %d nodekit %d, containers %d %d; want 110 and 220", len(ku.Pods), len(nk.Pods), len(kc), len(nc))
	}
	for k, v := range kc {
		if nc[k] != v {
			t.Errorf("%s: kubelet CPU %d, nodekit %d", k, v, nc[k])
		}
	}
	for _, p := range ku.Pods {
		if p.CPU == nil || p.Memory == nil || p.Memory.WorkingSetBytes == nil || *p.Memory.WorkingSetBytes != 10<<20 {
			t.Fatalf("kubelet pod %s without the fake's CPU and memory: %+v", p.PodRef.Name, p.Memory)
		}
	}
}

func BenchmarkStatsSummaryOnlyCPUAndMemory(b *testing.B) {
	rt, clk := statsRuntime(b, 110)
	ctx := context.Background()
	b.Run("pods=110", func(b *testing.B) {
		b.Run("nodekit", func(b *testing.B) {
			p := nodekitSummaryProvider(b, rt, clk)
			b.ReportAllocs()
			for b.Loop() {
				s, err := p.Summary(ctx, true)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("kubelet", func(b *testing.B) {
			p := kubeletSummaryProvider(rt, clk.Now())
			b.ReportAllocs()
			for b.Loop() {
				s, err := p.GetCPUAndMemoryStats(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
