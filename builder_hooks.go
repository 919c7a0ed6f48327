package nodekit

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/syncloop"
)

// The node-level managers (volumes, cgroups, probes, and whatever a caller
// brings) plug into the agent through these methods. Each is optional: a
// part left out is a no-op, as in a kubelet with the feature off.

// WithVolumes sets the volume manager: the sync loop waits on it before a
// pod's containers start and after they stop, and the runtime takes the
// containers' mounts from it. Either may be nil.
func (b *Builder) WithVolumes(hooks syncloop.VolumeHooks, mounts kuberuntime.MountProvider) *Builder {
	b.volumes, b.mounts = hooks, mounts
	return b
}

// WithCgroups sets the container manager: the sync loop makes and removes
// pod cgroups through hooks, and the runtime places sandboxes under the
// parent it names. Either may be nil.
func (b *Builder) WithCgroups(hooks syncloop.CgroupHooks, parents kuberuntime.CgroupParentProvider) *Builder {
	b.cgroups, b.cgroupParents = hooks, parents
	return b
}

// WithProbes sets the prober: the sync loop starts and stops a pod's probes
// through hooks, the pod status takes readiness and startup from state, and
// the runtime restarts containers whose liveness or startup probe failed
// (results). Any may be nil.
func (b *Builder) WithProbes(hooks syncloop.ProbeHooks, state podstatus.ProbeState, results kuberuntime.ProbeResults) *Builder {
	b.probes, b.probeState, b.probeResults = hooks, state, results
	return b
}

// WithRuntimeConfig lets the caller adjust the runtime engine's Config
// (DNS, env sources, GC, seccomp...) after the Builder filled it in.
func (b *Builder) WithRuntimeConfig(edit func(*kuberuntime.Config)) *Builder {
	b.runtimeEdits = append(b.runtimeEdits, edit)
	return b
}

// WithSyncLoopConfig lets the caller adjust the sync loop's Config after the
// Builder filled it in (periods, pull secrets, extra inputs).
func (b *Builder) WithSyncLoopConfig(edit func(*syncloop.Config)) *Builder {
	b.loopEdits = append(b.loopEdits, edit)
	return b
}

// WithPart adds a component the agent runs: started after the PLEG and
// before the sync loop, stopped after the sync loop (in reverse order of
// the WithPart calls). run must return when its ctx ends; an early return,
// even nil, stops the agent.
func (b *Builder) WithPart(name string, run func(ctx context.Context) error) *Builder {
	b.parts = append(b.parts, extraPart{name: name, run: run})
	return b
}

// WithAgentPart adds a component built from the built Agent, for parts
// that read it (agentserver.Wire's HTTPS API reads its pods, runtime and
// health): make is called by Build once every other part is made, and an
// error from it fails Build. The part then runs as WithPart's do, after
// the cluster's parts.
func (b *Builder) WithAgentPart(name string, make func(a *Agent) (run func(ctx context.Context) error, err error)) *Builder {
	if name == "" || make == nil {
		b.misuse = append(b.misuse, configErr("parts", "WithAgentPart needs a name and a func"))
		return b
	}
	b.agentParts = append(b.agentParts, agentPart{name: name, make: make})
	return b
}

type agentPart struct {
	name string
	make func(a *Agent) (func(ctx context.Context) error, error)
}

func (bd *build) agentParts() {
	for _, p := range bd.b.agentParts {
		run, err := p.make(bd.a)
		if err != nil {
			bd.fail(partErr(p.name, err))
			continue
		}
		if run == nil {
			bd.fail(configErr(p.name, "WithAgentPart: no run func"))
			continue
		}
		bd.a.parts = append(bd.a.parts, extraPart{name: p.name, run: run})
	}
}

type extraPart struct {
	name string
	run  func(ctx context.Context) error
}

// WithPodTerminated adds a function called once a pod has fully stopped
// (containers gone, volumes unmounted, cgroup removed): where the cpu and
// memory managers give back what the pod held.
func (b *Builder) WithPodTerminated(f func(ctx context.Context, pod *v1.Pod) error) *Builder {
	return b.WithSyncLoopConfig(func(c *syncloop.Config) { c.PodTerminated = append(c.PodTerminated, f) })
}

// ActivePods returns the pods the agent runs or is about to run (not those
// known to be stopped), for managers that keep resources per pod.
func (a *Agent) ActivePods() []*v1.Pod {
	if a.loop == nil {
		return nil
	}
	return a.loop.ActivePods()
}
