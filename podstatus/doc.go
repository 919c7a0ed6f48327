// Package podstatus is everything the agent knows and says about a pod's
// API status: the generator that turns the runtime's view of a pod
// (kubetypes.PodStatus) into a v1.PodStatus, the pod conditions, and the
// status manager that caches each pod's status and delivers it to a Sink
// (the kubelet's status manager and generateAPIPodStatus).
//
//	sm, err := podstatus.New(podstatus.Config{
//		Sink:              sink,    // a Sink: the API server (podstatus/apiserver), a file, MemorySink
//		ContainerActivity: workers, // *podworkers.Workers: no terminal phase while containers may run
//	})
//	go sm.Run(ctx) // offers changed statuses to the sink; returns once stopped
//	status := podstatus.Generate(pod, runtimeStatus, sm.GetPodStatus(pod.UID), reasons, probes, now)
//	sm.SetPodStatus(pod, status)
//
// # Generation
//
// Generate (or a Generator with the node's IPs, runtime name and version)
// computes a pod's status as the kubelet does: container statuses per
// instance (waiting with the ReasonSource's reason, running, terminated with
// the termination message, last state from the previous instance), the
// phase (Pending, Running, Succeeded, Failed; restart policy and sidecars
// taken into account), the PodScheduled, PodReadyToStartContainers,
// Initialized, ContainersReady and Ready conditions (readiness gates and
// probe results from ProbeState), pod IPs from the runtime sorted to the
// node's IP family first, and the QoS class. GenerateTerminal is the same
// for a pod whose containers will not be started again. A phase that is
// terminal in the old status never goes back.
//
// # The status manager
//
// Manager keeps each pod's latest status with a version that grows only
// when the status changes (compared semantically: times in other locations,
// quantities spelled otherwise and nil against empty are equal). Run offers
// the sink every status newer than the one it last accepted, at once after
// a change and every SyncPeriod (10s) for those it refused, from one
// goroutine. SetContainerReadiness and SetContainerStartup apply probe
// results; TerminatePod makes a stopped pod's status final (every container
// terminated, the phase terminal); RemoveOrphanedStatuses forgets pods
// that are gone. With ContainerActivity, a terminal phase is held back while
// the pod's containers may still run (a pod the sink has no status of yet
// then gets none until the terminal one can go, so its first report is
// never a placeholder; Recheck retries the held-back ones). A sink that also implements
// PodDeleter is asked to delete a finished pod that has a deletion
// timestamp (never a mirror pod).
//
// MemorySink keeps the statuses in memory (the default of a standalone
// agent); podstatus/apiserver sends them to the API server, on the mirror
// pod for a static pod.
package podstatus
