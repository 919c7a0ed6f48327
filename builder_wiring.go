package nodekit

import (
	"context"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// Wiring is the Build hooks of an optional part wired by a package of its
// own, so that the root package does not import (and a program that never
// uses the part does not link) the part's code: package containermgr/cmwire
// wires the container, CPU and memory managers this way. Build calls the
// hooks in its phases, the wirings in the order of their Rank whatever the
// order of the calls, as it does for its own one-call wirings (WithProber,
// WithVolumeManager, WithEviction...). Every hook may be nil.
type Wiring struct {
	// Call names the call that gave the wiring in Build's errors
	// ("cmwire.ContainerManager"); a second wiring with the same Call is
	// a misuse Build reports. Required.
	Call string
	// Name is the part's name in the agent (its Run and errors).
	Name string
	// Rank orders the wirings' hooks: RankContainerManager and the other
	// Rank constants.
	Rank int
	// Err, when set, is a misuse of the call (a nil manager) Build
	// reports; the hooks are then not used.
	Err error
	// Engine adjusts the runtime engine's Config (before
	// WithRuntimeConfig's edits).
	Engine func(cfg *kuberuntime.Config)
	// Loop adjusts the sync loop's Config (before WithAdmitHandler's
	// checks and WithSyncLoopConfig's edits).
	Loop func(cfg *syncloop.Config)
	// Connect runs once every part is made. It returns start, which
	// Agent.Run calls (the wirings' in Rank order) before any part starts,
	// for state to load before the first pod is admitted, and run, the
	// part run for the agent's life (started after the PLEG, before the
	// sync loop, under Name); either may be nil. An error fails Build.
	Connect func(a *Agent) (start, run func(ctx context.Context) error, err error)
	// Cgroups, when set, is the node's pod cgroups as a container manager
	// keeps them: WithEviction and WithStats read their cgroup stats
	// there, and it excludes WithCgroups.
	Cgroups PodCgroups
}

// PodCgroups is what WithEviction and WithStats read of a container
// manager (containermgr.Manager, wired by cmwire.ContainerManager).
type PodCgroups interface {
	// MemoryCgroupPaths returns the memory cgroups of the node (the
	// cgroup root) and of the pods, known once the manager started.
	MemoryCgroupPaths() (root, pods string, err error)
	// NodeAllocatable returns the node's allocatable resources.
	NodeAllocatable() v1.ResourceList
	// EnforcesPodsAllocatable reports whether the pods cgroup is limited
	// to the allocatable resources.
	EnforcesPodsAllocatable() bool
}

// The Ranks of the wirings given to WithWiring: their hooks run in this
// order among the Builder's own wirings.
const (
	RankContainerManager = rankContainerMgr
	RankCPUManager       = rankCPU
	RankMemoryManager    = rankMemory
	RankContainerdEvents = rankContainerdEvents
)

// WithWiring adds the hooks of an optional part (see Wiring); packages
// that wire a part call it (cmwire.ContainerManager), programs rarely.
func (b *Builder) WithWiring(w Wiring) *Builder {
	switch {
	case w.Call == "":
		return b.fail("WithWiring: the wiring has no Call")
	case w.Err != nil:
		b.misuse = append(b.misuse, configErr("builder", "%s: %v", w.Call, w.Err))
		return b
	}
	for _, c := range b.wiredCalls {
		if c == w.Call {
			return b.fail("%s given twice", w.Call)
		}
	}
	b.wiredCalls = append(b.wiredCalls, w.Call)
	if w.Cgroups != nil {
		b.podCgroups, b.podCgroupsCall = w.Cgroups, w.Call
	}
	hooks := wiring{rank: w.Rank}
	if w.Engine != nil {
		hooks.engine = func(_ *build, cfg *kuberuntime.Config) { w.Engine(cfg) }
	}
	if w.Loop != nil {
		hooks.loop = func(_ *build, cfg *syncloop.Config) { w.Loop(cfg) }
	}
	if w.Connect != nil {
		hooks.connect = func(bd *build) {
			start, run, err := w.Connect(bd.a)
			if err != nil {
				bd.fail(partErr(w.Name, err))
				return
			}
			if start != nil {
				bd.a.starters = append(bd.a.starters, start)
			}
			if run != nil {
				bd.a.parts = append(bd.a.parts, extraPart{name: w.Name, run: run})
			}
		}
	}
	b.wired = append(b.wired, hooks)
	return b
}

// AdmitWith turns a manager's Admit (the CPU, memory and device managers')
// into a sync loop admission check.
func AdmitWith(admit func(pod *v1.Pod, active []*v1.Pod) (ok bool, reason, message string)) syncloop.AdmitHandler {
	return admitWith(admit)
}

// NodeName returns the node's name (WithNodeName).
func (a *Agent) NodeName() string { return a.node }

// RootDir returns the agent's state directory (WithRootDir), where parts
// keep their files as the kubelet does in its root directory.
func (a *Agent) RootDir() string { return a.rootDir }

// RuntimeEndpoint returns WithRuntimeEndpoint's endpoint ("" with another
// runtime).
func (a *Agent) RuntimeEndpoint() string { return a.endpoint }

// Clock returns the clock of every part (WithClock, else the real clock).
func (a *Agent) Clock() clock.WithTicker { return a.clock }

// Logger returns the agent's logger (WithLogger, named "nodekit").
func (a *Agent) Logger() *zap.Logger { return a.log }

// fail records a Builder misuse, reported by Build with the rest.
func (b *Builder) fail(format string, args ...any) *Builder {
	b.misuse = append(b.misuse, configErr("builder", format, args...))
	return b
}
