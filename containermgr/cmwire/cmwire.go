package cmwire

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/memorymanager"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

var errNilManager = errors.New("was given a nil manager")

// ContainerManager wires a cgroup container manager into b's agent in one
// call and returns b: pod cgroups are made before a pod's containers and
// removed after them, sandboxes are placed in them, admission checks
// requests against the node's allocatable resources, the QoS tree is made
// before the first pod runs, and the manager's periodic QoS update runs for
// the agent's life. When the runtime reports its cgroup driver (CRI
// RuntimeConfig, containerd 2.x) the manager uses it instead of its
// configured one, with a warning when they differ. Builder.WithEviction
// and Builder.WithStats then read their cgroup stats from the manager's
// cgroups. It excludes Builder.WithCgroups.
func ContainerManager(b *nodekit.Builder, m *containermgr.Manager) *nodekit.Builder {
	w := nodekit.Wiring{Call: "cmwire.ContainerManager", Name: "containermgr", Rank: nodekit.RankContainerManager}
	if m == nil {
		w.Err = errNilManager
		return b.WithWiring(w)
	}
	w.Cgroups = m
	w.Engine = func(cfg *kuberuntime.Config) { cfg.CgroupParents, cfg.NodeAllocatable = m, m.NodeAllocatable }
	w.Loop = func(cfg *syncloop.Config) { cfg.Cgroups, cfg.NodeAllocatable = m, m.NodeAllocatable }
	w.Connect = func(a *nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
		m.UseEventRecorder(a.EventRecorder(), a.NodeName())
		start = func(ctx context.Context) error {
			// The runtime's cgroup driver wins over the configured one.
			if err := adoptRuntimeCgroupDriver(ctx, a.CRI(), m, a.Logger()); err != nil {
				return fmt.Errorf("nodekit: the runtime's cgroup driver: %w", err)
			}
			if err := m.Start(ctx); err != nil {
				return fmt.Errorf("nodekit: starting the container manager: %w", err)
			}
			return nil
		}
		return start, m.Run, nil
	}
	return b.WithWiring(w)
}

// CPUManager wires a CPU manager into b's agent in one call and returns b:
// it loads its checkpoint before the first pod is admitted, admission
// allocates exclusive CPUs (a pod that can't get them is rejected),
// containers are created with their cpusets, CPUs come back when a pod has
// stopped, and the reconcile loop runs for the agent's life.
func CPUManager(b *nodekit.Builder, m *cpumanager.Manager) *nodekit.Builder {
	w := nodekit.Wiring{Call: "cmwire.CPUManager", Name: "cpumanager", Rank: nodekit.RankCPUManager}
	if m == nil {
		w.Err = errNilManager
		return b.WithWiring(w)
	}
	w.Engine = func(cfg *kuberuntime.Config) { cfg.CPUSets = m }
	w.Loop = func(cfg *syncloop.Config) {
		cfg.Admitters = append(cfg.Admitters, nodekit.AdmitWith(m.Admit))
		cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	}
	w.Connect = func(a *nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
		start = func(ctx context.Context) error {
			if err := m.Start(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the CPU manager: %w", err)
			}
			return nil
		}
		return start, m.Run, nil
	}
	return b.WithWiring(w)
}

// MemoryManager wires a memory manager into b's agent and returns b: it
// loads its checkpoint before the first pod is admitted, admission accounts
// Guaranteed pods' memory per NUMA node (a pod that fits nowhere is
// rejected), and the memory comes back when a pod has stopped.
func MemoryManager(b *nodekit.Builder, m *memorymanager.Manager) *nodekit.Builder {
	w := nodekit.Wiring{Call: "cmwire.MemoryManager", Name: "memorymanager", Rank: nodekit.RankMemoryManager}
	if m == nil {
		w.Err = errNilManager
		return b.WithWiring(w)
	}
	w.Loop = func(cfg *syncloop.Config) {
		cfg.Admitters = append(cfg.Admitters, nodekit.AdmitWith(m.Admit))
		cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	}
	w.Connect = func(a *nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
		start = func(ctx context.Context) error {
			if err := m.StartWithActivePods(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the memory manager: %w", err)
			}
			return nil
		}
		return start, nil, nil
	}
	return b.WithWiring(w)
}
