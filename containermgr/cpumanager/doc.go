// Package cpumanager gives Guaranteed containers exclusive CPUs, as the
// kubelet's CPU manager does with --cpu-manager-policy=static.
//
// Policies: PolicyNone (the default) pins nothing. PolicyStatic keeps a
// shared pool (every CPU at first) and hands a container of a Guaranteed
// pod whose cpu request is a whole number N exactly N CPUs of its own,
// taken out of the pool; every other container runs on the pool. The
// reserved CPUs (Config.ReservedCPUs, or NumReservedCPUs chosen by
// topology) stay in the pool and are never given exclusively; the static
// policy needs at least one. CPUs are chosen by topology like the kubelet's
// packed allocation: whole NUMA nodes or sockets when the request covers
// one, then whole cores, then single threads, preferring the groups with
// the fewest free CPUs. A shortage is an error wrapping ErrNotEnoughCPUs
// ("not enough cpus available to satisfy request: requested=N,
// available=M"). A repeat allocation is a no-op; an app container may reuse
// the CPUs of its pod's (non-restartable) init containers.
//
// State is the checkpoint cpu_manager_state in Config.StateDir (JSON
// {policyName, defaultCpuSet, entries{podUID:{container:cpuset}}} inside
// internal/checkpoint's atomic, checksummed file). Every change is written
// before the call that makes it returns success, so a crash leaves the
// old or the new state, never half of one. Start sets a corrupt, foreign
// or inconsistent file aside as cpu_manager_state.corrupt and starts with
// an empty state (logged as an error) instead of refusing to start — the
// kubelet refuses here.
//
// Wiring into an agent: allocation happens at admission, before any
// container is created (Admit); the runtime takes each container's cpuset
// from ContainerCPUSet (runtime.Config.CPUSets); Run re-applies cpusets
// through CRI every 10s and purges assignments of pods that are gone once
// the sources are ready; RemovePod gives a terminated pod's CPUs back.
//
//	mgr, err := cpumanager.New(cpumanager.Config{Policy: cpumanager.PolicyStatic,
//		Topology: topo, NumReservedCPUs: 1, StateDir: dir, Runtime: cri})
//	err = mgr.Start(ctx, activePods)
//	nodekit.NewBuilder().
//		WithAdmitHandler(cpuAdmitter{mgr}).
//		WithRuntimeConfig(func(c *runtime.Config) { c.CPUSets = mgr }).
//		WithPart("cpumanager", mgr.Run)
//
// Admit has plain results so that this package need not import the sync
// loop; the adapter to syncloop.AdmitHandler is three lines:
//
//	type cpuAdmitter struct{ m *cpumanager.Manager }
//
//	func (a cpuAdmitter) Admit(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
//		ok, reason, msg := a.m.Admit(pod, active)
//		return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
//	}
//
// Not done (kubelet features): topology manager hints and NUMA alignment
// with other resources, the policy options (full-pcpus-only, distribute
// across NUMA, uncore cache alignment, strict reservation), pod-level
// resources, and rebuilding lost exclusive assignments from the running
// containers' cpusets after a corrupt checkpoint.
package cpumanager
