package nodekit

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/memorymanager"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// WithContainerManager wires a cgroup container manager in one call: pod
// cgroups are made before a pod's containers and removed after them,
// sandboxes are placed in them, admission checks requests against the
// node's allocatable resources, the QoS tree is made before the first pod
// runs, and the manager's periodic QoS update runs for the agent's life.
// When the runtime reports its cgroup driver (CRI RuntimeConfig, containerd
// 2.x) the manager uses it instead of its configured one, with a warning
// when they differ.
func (b *Builder) WithContainerManager(m *containermgr.Manager) *Builder {
	if m == nil {
		return b.fail("WithContainerManager was given a nil manager")
	}
	b.WithCgroups(m, m)
	b.WithNodeAllocatable(m.NodeAllocatable)
	b.afterBuild = append(b.afterBuild, func(a *Agent) error {
		a.starters = append(a.starters, func(ctx context.Context) error {
			// The runtime's cgroup driver wins over the configured one.
			if err := adoptRuntimeCgroupDriver(ctx, a.cri, m, a.log); err != nil {
				return fmt.Errorf("nodekit: the runtime's cgroup driver: %w", err)
			}
			if err := m.Start(ctx); err != nil {
				return fmt.Errorf("nodekit: starting the container manager: %w", err)
			}
			return nil
		})
		return nil
	})
	return b.WithPart("containermgr", m.Run)
}

// WithCPUManager wires a CPU manager in one call: it loads its checkpoint
// before the first pod is admitted, admission allocates exclusive CPUs
// (a pod that can't get them is rejected), containers are created with
// their cpusets, CPUs come back when a pod has stopped, and the reconcile
// loop runs for the agent's life.
func (b *Builder) WithCPUManager(m *cpumanager.Manager) *Builder {
	if m == nil {
		return b.fail("WithCPUManager was given a nil manager")
	}
	b.WithAdmitHandler(syncloop.AdmitFunc(func(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
		ok, reason, msg := m.Admit(pod, active)
		return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
	}))
	b.WithRuntimeConfig(func(c *kuberuntime.Config) { c.CPUSets = m })
	b.WithPodTerminated(func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	b.afterBuild = append(b.afterBuild, func(a *Agent) error {
		a.starters = append(a.starters, func(ctx context.Context) error {
			if err := m.Start(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the CPU manager: %w", err)
			}
			return nil
		})
		return nil
	})
	return b.WithPart("cpumanager", m.Run)
}

// WithMemoryManager wires a memory manager: it loads its checkpoint before
// the first pod is admitted, admission accounts Guaranteed pods' memory per
// NUMA node (a pod that fits nowhere is rejected), and the memory comes back
// when a pod has stopped.
func (b *Builder) WithMemoryManager(m *memorymanager.Manager) *Builder {
	if m == nil {
		return b.fail("WithMemoryManager was given a nil manager")
	}
	b.WithAdmitHandler(syncloop.AdmitFunc(func(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
		ok, reason, msg := m.Admit(pod, active)
		return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
	}))
	b.WithPodTerminated(func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	b.afterBuild = append(b.afterBuild, func(a *Agent) error {
		a.starters = append(a.starters, func(ctx context.Context) error {
			if err := m.StartWithActivePods(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the memory manager: %w", err)
			}
			return nil
		})
		return nil
	})
	return b
}

// fail records a Builder misuse, reported by Build with the rest.
func (b *Builder) fail(format string, args ...any) *Builder {
	err := configErr("builder", format, args...)
	b.afterBuild = append(b.afterBuild, func(*Agent) error { return err })
	return b
}
