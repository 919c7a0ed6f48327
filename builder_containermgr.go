package nodekit

import (
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/memorymanager"
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
	return record(b, &b.containerMgr, m, "WithContainerManager")
}

// WithCPUManager wires a CPU manager in one call: it loads its checkpoint
// before the first pod is admitted, admission allocates exclusive CPUs
// (a pod that can't get them is rejected), containers are created with
// their cpusets, CPUs come back when a pod has stopped, and the reconcile
// loop runs for the agent's life.
func (b *Builder) WithCPUManager(m *cpumanager.Manager) *Builder {
	return record(b, &b.cpuMgr, m, "WithCPUManager")
}

// WithMemoryManager wires a memory manager: it loads its checkpoint before
// the first pod is admitted, admission accounts Guaranteed pods' memory per
// NUMA node (a pod that fits nowhere is rejected), and the memory comes back
// when a pod has stopped.
func (b *Builder) WithMemoryManager(m *memorymanager.Manager) *Builder {
	return record(b, &b.memoryMgr, m, "WithMemoryManager")
}

// record keeps the manager of a one-call wiring for Build; a nil manager or
// a second call is a misuse Build reports.
func record[T any](b *Builder, dst **T, m *T, call string) *Builder {
	switch {
	case m == nil:
		return b.fail("%s was given a nil manager", call)
	case *dst != nil:
		return b.fail("%s given twice", call)
	}
	*dst = m
	return b
}

// fail records a Builder misuse, reported by Build with the rest.
func (b *Builder) fail(format string, args ...any) *Builder {
	b.misuse = append(b.misuse, configErr("builder", format, args...))
	return b
}
