// Package nodeshutdown is the kubelet's graceful node shutdown: when the
// machine is about to power off, the active pods are killed in priority
// groups, each within its budget, with the kubelet's status; meanwhile the
// node refuses new pods and reports itself not ready.
//
//	m, err := nodeshutdown.New(nodeshutdown.Config{
//		GracePeriod:             30 * time.Second, // the kubelet's shutdownGracePeriod
//		GracePeriodCriticalPods: 10 * time.Second, // shutdownGracePeriodCriticalPods
//		ActivePods:              agent.ActivePods,
//		KillPod:                 killThroughPodWorkers,
//	})
//	go m.Run(ctx)             // serves m.Request() (e.g. from a SIGTERM handler)
//	err = m.Shutdown(ctx)     // or the synchronous step: returns when the pods are done
//
// agentshutdown.Wire does this wiring for a nodekit Agent; on systemd
// machines nodeshutdown/systemd's logind inhibitor calls Shutdown when
// logind announces the shutdown (PrepareForShutdown).
//
// # Groups and budgets
//
// GracePeriod and GracePeriodCriticalPods make two groups, as the kubelet's
// do: priority 0 and above with GracePeriod - GracePeriodCriticalPods, and
// the critical pods (priority >= 2000000000) with GracePeriodCriticalPods.
// GracePeriodByPodPriority gives the groups instead (not both). A pod joins
// the group of the highest priority at or below its spec.priority (no
// priority counts as 0); below every group, the lowest; above every group,
// the highest. Only spec.priority counts: a static pod without one is in
// the lowest group, as in the kubelet, although kubetypes.IsCriticalPod
// calls every static pod critical.
//
// Groups go from the lowest priority up; empty groups are skipped. A
// group's pods are killed together, each with a grace period of its
// group's budget, or its terminationGracePeriodSeconds when smaller. The
// next group starts when every pod of the group has stopped (and, with
// WaitForUnmount, its volumes are unmounted) or when the group's budget has
// passed on the clock, whichever is first; a kill still going on then goes
// on (the pod workers finish it). Shutdown returns after the last group:
// at most the sum of the budgets (PeriodRequested) after it started.
//
// # What the pods, the node and admission see
//
// A killed pod's final status is phase Failed (Succeeded stays Succeeded),
// reason "Terminated", message "Pod was terminated in response to imminent
// node shutdown.", with a DisruptionTarget condition (True, reason
// TerminationByKubelet, the same message). Mirror pods are never killed
// (they are the API server's copy of a static pod): the static pod is
// killed as itself, and its status reaches its mirror pod. From the start
// of the shutdown, Admit refuses every pod (reason "NodeShutdown", "Pod was
// rejected as the node is shutting down."), so nothing new starts, and
// ShutdownStatus returns ErrShuttingDown ("node is shutting down"), the
// message of the node's Ready False condition; OnChange lets the node
// status report that at once. CancelShutdown (logind cancelled the
// shutdown) makes the node ready and admitting again; killed pods stay
// stopped.
//
// Events: NodeShutdown on the node when a shutdown starts and when it is
// cancelled. Metrics (Config.Registerer):
// kubelet_graceful_shutdown_start_time_seconds and
// kubelet_graceful_shutdown_end_time_seconds.
package nodeshutdown
