package benchmarks

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	kcpu "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	kcpustate "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	kcputopo "k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/topology"
)

// The static policy on 64 CPUs (2 sockets x 16 cores x 2 threads, one
// NUMA node per socket), 2 CPUs reserved. One iteration allocates the
// containers of 8 Guaranteed pods (4 and 2 exclusive CPUs and a 500m
// container on the shared pool each) and removes them again.
//
// Both sides keep their state in a checkpoint file, as they do in an
// agent, in a directory on tmpfs (/dev/shm when present): nodekit's
// Manager writes one checkpoint per AllocatePod / RemovePod (temp file,
// fsync, rename, directory fsync); the kubelet's static policy over its
// checkpoint state (what its Manager uses) writes one per state setter
// call (two per exclusive container allocated or removed). Neither side's
// manager loop (reconcile, CRI updates) runs.

const cpuPods = 8

func cpuTopo(tb testing.TB) *topology.Topology {
	t, err := topology.Synthetic(2, 16, 2, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// kubeletTopo is the same machine in the kubelet's types.
func kubeletTopo(t *topology.Topology) *kcputopo.CPUTopology {
	d := kcputopo.CPUDetails{}
	for _, c := range t.CPUs() {
		d[c.ID] = kcputopo.CPUInfo{NUMANodeID: c.NUMANode, SocketID: c.Socket, CoreID: c.Core, UncoreCacheID: c.Socket}
	}
	return &kcputopo.CPUTopology{NumCPUs: t.NumCPUs(), NumCores: t.NumCores(), NumUncoreCache: t.NumSockets(),
		NumSockets: t.NumSockets(), NumNUMANodes: t.NumNUMANodes(), CPUDetails: d}
}

func cpuPodSet() []*v1.Pod {
	pods := make([]*v1.Pod, cpuPods)
	for i := range pods {
		p := &v1.Pod{}
		p.UID, p.Name, p.Namespace = types.UID(fmt.Sprintf("uid-%d", i)), fmt.Sprintf("pod-%d", i), "default"
		for j, cpu := range []string{"4", "2", "500m"} {
			rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse("100Mi")}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", j),
				Resources: v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}})
		}
		p.Status.QOSClass = v1.PodQOSGuaranteed
		pods[i] = p
	}
	return pods
}

func stateDir(tb testing.TB) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "nodekit-bench-")
		if err == nil {
			tb.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return tb.TempDir()
}

// cpuDriver allocates or removes every container of pods; sets reports
// each container's cpuset ("" when it has no exclusive set) and the pool.
type cpuDriver struct {
	alloc  func(pods []*v1.Pod) error
	remove func(pods []*v1.Pod) error
	sets   func(pods []*v1.Pod) (map[string]string, string)
}

func newNKCPU(tb testing.TB) cpuDriver {
	m, err := cpumanager.New(cpumanager.Config{Policy: cpumanager.PolicyStatic, Topology: cpuTopo(tb), NumReservedCPUs: 2, StateDir: stateDir(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := m.Start(context.Background(), nil); err != nil {
		tb.Fatal(err)
	}
	return cpuDriver{
		// What nodekit's admission calls (Admit -> AllocatePod): every
		// container of the pod, one checkpoint write; RemovePod when the
		// pod is gone.
		alloc: func(pods []*v1.Pod) error {
			for _, p := range pods {
				if err := m.AllocatePod(p); err != nil {
					return err
				}
			}
			return nil
		},
		remove: func(pods []*v1.Pod) error {
			for _, p := range pods {
				if err := m.RemovePod(string(p.UID)); err != nil {
					return err
				}
			}
			return nil
		},
		sets: func(pods []*v1.Pod) (map[string]string, string) {
			out := map[string]string{}
			for _, p := range pods {
				for _, c := range p.Spec.Containers {
					if s, ok := m.GetCPUSet(string(p.UID), c.Name); ok {
						out[p.Name+"/"+c.Name] = s.String()
					}
				}
			}
			return out, m.DefaultCPUSet().String()
		},
	}
}

func newKubeletCPU(tb testing.TB) cpuDriver {
	logger := logr.Discard()
	pol, err := kcpu.NewStaticPolicy(logger, kubeletTopo(cpuTopo(tb)), 2, cpuset.New(), topologymanager.NewFakeManager(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	st, err := kcpustate.NewCheckpointState(logger, stateDir(tb), "cpu_manager_state", pol.Name(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := pol.Start(logger, st); err != nil {
		tb.Fatal(err)
	}
	return cpuDriver{
		// What the kubelet's admission does (its topology manager calls
		// the cpu manager's Allocate for each container) and what its
		// RemoveContainer does for each container.
		alloc: func(pods []*v1.Pod) error {
			for _, p := range pods {
				for i := range p.Spec.Containers {
					if err := pol.Allocate(logger, st, p, &p.Spec.Containers[i]); err != nil {
						return err
					}
				}
			}
			return nil
		},
		remove: func(pods []*v1.Pod) error {
			for _, p := range pods {
				for _, c := range p.Spec.Containers {
					if err := pol.RemoveContainer(logger, st, string(p.UID), c.Name); err != nil {
						return err
					}
				}
			}
			return nil
		},
		sets: func(pods []*v1.Pod) (map[string]string, string) {
			out := map[string]string{}
			for _, p := range pods {
				for _, c := range p.Spec.Containers {
					if s, ok := st.GetCPUSet(string(p.UID), c.Name); ok {
						out[p.Name+"/"+c.Name] = s.String()
					}
				}
			}
			return out, st.GetDefaultCPUSet().String()
		},
	}
}

type cpuImpl struct {
	name string
	new  func(testing.TB) cpuDriver
}

var cpuImpls = []cpuImpl{{"nodekit", newNKCPU}, {"kubelet", newKubeletCPU}}

func checkCPUSame(tb testing.TB) {
	tb.Helper()
	pods := cpuPodSet()
	var got [2]map[string]string
	var pool, after [2]string
	for i, impl := range cpuImpls {
		d := impl.new(tb)
		if err := d.alloc(pods); err != nil {
			tb.Fatalf("%s allocate: %v", impl.name, err)
		}
		got[i], pool[i] = d.sets(pods)
		if err := d.remove(pods); err != nil {
			tb.Fatalf("%s remove: %v", impl.name, err)
		}
		_, after[i] = d.sets(pods)
	}
	if len(got[0]) != len(got[1]) {
		tb.Fatalf("cpumanager: nodekit pinned %d containers, kubelet %d", len(got[0]), len(got[1]))
	}
	for k, v := range got[0] {
		if got[1][k] != v {
			tb.Fatalf("cpumanager %s: nodekit %q, kubelet %q", k, v, got[1][k])
		}
	}
	if pool[0] != pool[1] || after[0] != after[1] {
		tb.Fatalf("cpumanager pool: nodekit %q then %q, kubelet %q then %q", pool[0], after[0], pool[1], after[1])
	}
}

func TestCPUManagerSameAllocation(t *testing.T) { checkCPUSame(t) }

func BenchmarkCPUManagerStatic(b *testing.B) {
	checkCPUSame(b)
	b.Run("cpus=64", func(b *testing.B) {
		for _, impl := range cpuImpls {
			b.Run(impl.name, func(b *testing.B) {
				d := impl.new(b)
				pods := cpuPodSet()
				loop(b, func() {
					if err := d.alloc(pods); err != nil {
						b.Fatal(err)
					}
					if err := d.remove(pods); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	})
}
