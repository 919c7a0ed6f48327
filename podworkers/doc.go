// Package podworkers drives each pod through its life on the node, one
// goroutine per pod UID: the kubelet's pod workers. It decides when a pod is
// synced, stopped and cleaned up; what a sync does is the PodSyncer's job
// (the sync loop implements it on top of the runtime engine, volumes,
// cgroups and the status manager).
//
//	pw, err := podworkers.New(podworkers.Config{
//		Syncer: syncer, // PodSyncer: SyncPod, SyncTerminatingPod, ...
//		Cache:  cache,  // PodCache: pleg's cache (GetNewerThan)
//	})
//	go pw.Run(ctx) // returns once every worker goroutine has exited
//	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
//
// # The life of a pod
//
// A pod is in one State at a time and only moves forward:
//
//   - SyncPod: each update (SyncPodCreate, SyncPodUpdate, SyncPodSync) calls
//     PodSyncer.SyncPod with the pod's newest runtime status from the cache
//     (one at least as new as the end of the previous sync, or as the time
//     the syncer marked with MarkRuntimeSynced). A sync that reports the pod
//     terminal (Succeeded or Failed) moves it on.
//   - TerminatingPod: a kill (SyncPodKill, a deletion timestamp, removal from
//     its source, a terminal sync) cancels a running sync and calls
//     SyncTerminatingPod with the effective grace period: the kill's
//     override, else the deletion grace, else the spec's; 0 means 1, and a
//     grace period never grows once set. A shorter grace given while it
//     runs cancels it and calls it again. It is retried until it succeeds.
//   - TerminatedPod: SyncTerminatedPod releases what the pod holds (volumes,
//     cgroups) and writes its final status; retried until it succeeds.
//   - finished: nothing of the pod runs; SyncKnownPods forgets the pod once
//     its source no longer has it.
//
// A pod that only the runtime knows (an orphan, RunningPod without Pod) goes
// straight to terminating through SyncTerminatingRuntimePod.
//
// Updates for one pod are never processed concurrently: while a sync runs,
// only the latest further update is kept and runs next. After a successful
// sync the pod is put on the WorkQueue, due after ResyncInterval (1m); after
// a failed one after BackOffPeriod (10s); both stretched by up to half at
// random (Config.Rand). An error that wraps only back-off errors
// (kubetypes.ErrCrashLoopBackOff, ErrImagePullBackOff, or a BackoffError)
// is a wait, logged at Debug, not a failure.
//
// Static pods: of several pods with the same full name (name_namespace),
// only one runs at a time; the next starts once the previous has
// terminated, in the order they arrived.
//
// # Questions the rest of the agent asks
//
// The predicates (IsPodKnownTerminated, CouldHaveRunningContainers,
// ShouldPodBeFinished, IsPodTerminationRequested,
// ShouldPodContainersBeTerminating, ShouldPodRuntimeBeRemoved,
// ShouldPodContentBeRemoved, IsPodForMirrorPodTerminatingByFullName) tell
// housekeeping, garbage collection, the status manager and the mirror-pod
// client what may be removed or reported. PodState reports a pod's State.
//
// KillPodAndWait is the eviction path: it asks the pod's worker to stop the
// pod and returns once the terminating sync succeeded (the containers are
// stopped), or with ErrKillTimeout after max(10s, 1.5 x grace) on the clock.
// The terminated step may still be running when it returns.
//
// # Metrics
//
// With Config.Registerer: kubelet_pod_worker_duration_seconds{operation_type}.
package podworkers
