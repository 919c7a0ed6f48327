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
// or inconsistent file aside as cpu_manager_state.corrupt (logged as an
// error) instead of refusing to start — the kubelet refuses here — and
// then, as when the file is missing, rebuilds the state from the running
// containers (Config.Runtime, activePods given to Start): a running
// container of an active Guaranteed pod with a request of N whole CPUs
// whose current cpuset has exactly N CPUs of the machine, none reserved and
// none shared with another such container, keeps those CPUs; the rest is
// the shared pool, and every container left out is logged and moved to the
// pool by the next Reconcile. The current cpuset is Config.CurrentCPUSet
// when set (e.g. read from the container's cpuset cgroup), else CRI
// ContainerStatus Status.Resources.Linux.CpusetCpus (runtime/fake reports
// it; whether containerd 1.6 fills that field is not verified here). The
// rebuilt state is written before Start returns. Pods that activePods does
// not yet list at Start (sources not delivered) are not rebuilt.
//
// Wiring into an agent: allocation happens at admission, before any
// container is created (Admit); the runtime takes each container's cpuset
// from ContainerCPUSet (kuberuntime.Config.CPUSets); Run re-applies cpusets
// through CRI every 10s and purges assignments of pods that are gone once
// the sources are ready; RemovePod gives a terminated pod's CPUs back (in memory; the
// checkpoint gets it with the next write: an allocation, Reconcile, Run's period or Flush. A
// removal lost in a crash is dropped by the next Start when none of the pod's containers
// runs in the runtime (Config.Runtime), else purged by the first Reconcile once sources
// are ready).
//
//	mgr, err := cpumanager.New(cpumanager.Config{Policy: cpumanager.PolicyStatic,
//		Topology: topo, NumReservedCPUs: 1, StateDir: dir, Runtime: cri})
//	err = mgr.Start(ctx, activePods)
//	nodekit.NewBuilder().
//		WithAdmitHandler(cpuAdmitter{mgr}).
//		WithRuntimeConfig(func(c *kuberuntime.Config) { c.CPUSets = mgr }).
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
// resources.
package cpumanager
