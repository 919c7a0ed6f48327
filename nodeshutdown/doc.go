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
//
// # The state file
//
// With Config.StateDir (agentshutdown sets the agent's root directory when
// there is a Registerer, as the kubelet keeps it in its root directory
// when its metrics are on), the kubelet's state file
// StateDir/graceful_node_shutdown_state holds the last shutdown's times,
// in the kubelet's JSON ({"startTime": ..., "endTime": ...}, RFC 3339, in
// UTC): the start time when a shutdown starts (end
// 0001-01-01T00:00:00Z), both when it ends, each time written atomically
// (temporary file, fsync, rename, directory fsync) with the Config's
// clock, with the kubelet's mode 0644. A failed write is logged and the shutdown goes on. Run first
// loads the file (LoadState) and sets the gauges from it, so that after a
// reboot they tell when the last shutdown began and ended; an end of 0
// says it did not finish (the agent stopped or the power went first). No
// file is no error. A file that is truncated or garbled, larger than 4
// KiB (refused from its size, never read: no more than 4 KiB and a byte
// is read), not a regular file, or whose times make no sense (before 1970, an
// end without a start or before it) is rejected whole rather than half
// believed: the error, naming the file and the fault, is logged, the
// gauges stay 0, and the file (or the directory, FIFO or link in its
// place) is set aside as graceful_node_shutdown_state.corrupt, so that the
// next shutdown writes a new one. A time in the future is accepted (an
// appliance may boot with its clock behind).
//
// # A shutdown cut short
//
// The kubelet records the end time whenever its shutdown returns, and it
// returns only once every group is done (each pod stopped or its budget
// spent); the kubelet stopped in the middle records nothing more. A
// nodekit shutdown can also end early: Run's ctx ends (the embedding
// program stops the agent) or Shutdown's ctx does, during a grace period.
// Such a shutdown records no end time either: the end gauge stays 0 and
// the state file keeps only the start, so that after a reboot an end of 0
// still means "the last graceful shutdown did not complete" (the pods
// were not all stopped, nor their budgets spent), which an end time at
// the cut would hide. The cut is logged (Info, with how long the
// shutdown ran). A later Shutdown starts again, with a new start time.
package nodeshutdown
