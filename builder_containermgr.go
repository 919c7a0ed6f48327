package nodekit

import (
	"context"
	"fmt"

	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/memorymanager"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
	v1 "k8s.io/api/core/v1"
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
	return record(b, &b.containerMgr, m, "WithContainerManager", containerMgrWiring{m: m}.hooks())
}

// WithCPUManager wires a CPU manager in one call: it loads its checkpoint
// before the first pod is admitted, admission allocates exclusive CPUs
// (a pod that can't get them is rejected), containers are created with
// their cpusets, CPUs come back when a pod has stopped, and the reconcile
// loop runs for the agent's life.
func (b *Builder) WithCPUManager(m *cpumanager.Manager) *Builder {
	return record(b, &b.cpuMgr, m, "WithCPUManager", cpuWiring{m: m}.hooks())
}

// WithMemoryManager wires a memory manager: it loads its checkpoint before
// the first pod is admitted, admission accounts Guaranteed pods' memory per
// NUMA node (a pod that fits nowhere is rejected), and the memory comes back
// when a pod has stopped.
func (b *Builder) WithMemoryManager(m *memorymanager.Manager) *Builder {
	return record(b, &b.memoryMgr, m, "WithMemoryManager", memoryWiring{m: m}.hooks())
}

// record keeps the manager of a one-call wiring for Build; a nil manager or
// a second call is a misuse Build reports.
func record[T any](b *Builder, dst **T, m *T, call string, w wiring) *Builder {
	switch {
	case m == nil:
		return b.fail("%s was given a nil manager", call)
	case *dst != nil:
		return b.fail("%s given twice", call)
	}
	*dst = m
	b.wired = append(b.wired, w)
	return b
}

type containerMgrWiring struct {
	m *containermgr.Manager
}

func (w containerMgrWiring) hooks() wiring {
	return wiring{rank: rankContainerMgr, engine: w.engine, loop: w.loop, connect: w.connect}
}

func (w containerMgrWiring) engine(_ *build, cfg *kuberuntime.Config) {
	cfg.CgroupParents, cfg.NodeAllocatable = w.m, w.m.NodeAllocatable
}

func (w containerMgrWiring) loop(_ *build, cfg *syncloop.Config) {
	cfg.Cgroups, cfg.NodeAllocatable = w.m, w.m.NodeAllocatable
}

func (w containerMgrWiring) connect(bd *build) {
	a, m := bd.a, w.m
	m.UseEventRecorder(a.recorder, bd.b.nodeName)
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
	a.parts = append(a.parts, extraPart{name: "containermgr", run: m.Run})
}

type cpuWiring struct {
	m *cpumanager.Manager
}

func (w cpuWiring) hooks() wiring {
	return wiring{rank: rankCPU, engine: w.engine, loop: w.loop, connect: w.connect}
}

func (w cpuWiring) engine(_ *build, cfg *kuberuntime.Config) { cfg.CPUSets = w.m }

func (w cpuWiring) loop(_ *build, cfg *syncloop.Config) {
	m := w.m
	cfg.Admitters = append(cfg.Admitters, admitWith(m.Admit))
	cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
}

func (w cpuWiring) connect(bd *build) {
	a, m := bd.a, w.m
	a.starters = append(a.starters, func(ctx context.Context) error {
		if err := m.Start(ctx, a.ActivePods); err != nil {
			return fmt.Errorf("nodekit: starting the CPU manager: %w", err)
		}
		return nil
	})
	a.parts = append(a.parts, extraPart{name: "cpumanager", run: m.Run})
}

type memoryWiring struct {
	m *memorymanager.Manager
}

func (w memoryWiring) hooks() wiring {
	return wiring{rank: rankMemory, loop: w.loop, connect: w.connect}
}

func (w memoryWiring) loop(_ *build, cfg *syncloop.Config) {
	m := w.m
	cfg.Admitters = append(cfg.Admitters, admitWith(m.Admit))
	cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
}

func (w memoryWiring) connect(bd *build) {
	a, m := bd.a, w.m
	a.starters = append(a.starters, func(ctx context.Context) error {
		if err := m.StartWithActivePods(ctx, a.ActivePods); err != nil {
			return fmt.Errorf("nodekit: starting the memory manager: %w", err)
		}
		return nil
	})
}

// fail records a Builder misuse, reported by Build with the rest.
func (b *Builder) fail(format string, args ...any) *Builder {
	b.misuse = append(b.misuse, configErr("builder", format, args...))
	return b
}
