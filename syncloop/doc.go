// Package syncloop is the heart of a node agent: the sync loop that turns
// desired pods into running ones (the kubelet's syncLoop), with admission,
// housekeeping, runtime health and the pod syncer that the pod workers
// call. The pod workers (package podworkers) and the status manager
// (package podstatus) are its parts; Loop builds and runs both.
//
// # Wiring
//
// The package imports no pod source, no PLEG, no volume or cgroup manager:
// it speaks kubetypes' vocabulary and declares what it needs as small
// interfaces (RuntimeManager, PLEG, VolumeHooks, CgroupHooks, ProbeHooks),
// which nodekit's Builder fills in.
//
//	loop, err := syncloop.New(syncloop.Config{
//		Updates:       podConfig.Updates(), // <-chan kubetypes.PodUpdate
//		Events:        plg.Watch(),         // <-chan *kubetypes.PodLifecycleEvent
//		SourcesReady:  podConfig.SeenAllSources,
//		Runtime:       manager,             // *kuberuntime.Manager
//		RuntimeStatus: criRuntime,          // CRI Status
//		PLEG:          plg,                 // *pleg.GenericPLEG: cache, health, relists
//		Root:          "/var/lib/nodekit",
//	})
//	go loop.Run(ctx) // returns once its goroutines have exited
//	<-loop.Ready()
//
// # The loop
//
// Iterate is one turn of the loop. While the runtime is down (its CRI Status
// fails or RuntimeReady is false) or the PLEG is unhealthy, it dispatches
// nothing and waits, 100ms doubling to 5s (at start, only until the PLEG's
// first relist if the PLEG offers Relisted). Otherwise it waits for one of,
// without priority:
//
//   - a config update: ADD → HandlePodAdditions (oldest first, admission
//     against the active pods: a rejected pod gets phase Failed, the
//     handler's reason and "Pod was rejected: <message>", and no worker);
//     UPDATE and DELETE → HandlePodUpdates; REMOVE → HandlePodRemoves (the
//     kill waits until every source is ready; housekeeping does it then);
//     RECONCILE → HandlePodReconcile (status only; a pod whose readiness
//     gates changed its readiness is synced); SET → the set is diffed
//     against the known pods of its source (of all sources for SourceAll)
//     into the above;
//   - a PLEG event: every type but ContainerRemoved syncs the pod if known;
//     a container's death also asks the dead container deletor, without
//     waiting (a request is dropped when 50 wait), to remove the pod's
//     older exited instances of that container (keeping
//     GCPolicy.MaxPerPodContainer, at least the newest one, which the next
//     restart count is read from), or all of its exited containers when its
//     content may be removed, when the runtime can (RemoveDeadContainers);
//   - the sync tick (SyncPeriod, 1s): pods whose resync is due on the
//     pod workers' queue, and pods past their activeDeadlineSeconds;
//   - the housekeeping tick (HousekeepingPeriod, 2s): HandlePodCleanups,
//     once every source is ready (see there).
//
// A closed Updates channel ends the loop. Run runs Iterate until then, with
// the pod workers, the status manager, the runtime health checks
// (every RuntimeHealthPeriod, 5s) and the dead container deletor in their
// own goroutines, and joins them.
// The HandlePod* methods, PodsToSync, HandlePodCleanups and
// UpdateRuntimeHealth are the synchronous steps; they may be called
// directly (tests, embedders with their own loop).
//
// # Admission
//
// Built in, in order: resource fit (the new pod's requests plus those of
// the active pods must fit Config.NodeAllocatable for every resource it
// names, and the pod count; reasons OutOfcpu, OutOfmemory,
// OutOfephemeral-storage, OutOfpods, OutOf<name>, with the kubelet's message
// "Node didn't have enough resource: cpu, requested: R, used: U,
// capacity: C"), then host ports (reason NodePorts). Config.Admitters run
// after them; the first rejection wins. The newer pod is the one rejected,
// since pods are admitted oldest first against those already admitted.
//
// # The agent pod syncer
//
// The pod workers call the loop's PodSyncer:
//
//   - SyncPod: a pod whose status is terminal, or that is past its active
//     deadline (Failed, DeadlineExceeded), is reported terminal at once.
//     Otherwise a pod without host network waits for the runtime network
//     (retried after ~1s); then its directories, cgroup (CgroupHooks),
//     volumes (VolumeHooks) and probes (ProbeHooks) are set up and the
//     runtime converges it (runtime SyncPod). The API status is generated
//     (GeneratePodStatus, with the runtime as ReasonSource) and set on the
//     status manager before and after the runtime sync; a Succeeded or
//     Failed phase makes the pod terminal. The runtime sync runs with the
//     pod held in the PLEG (its HoldPod); when it changed something, the
//     pod is read once after it and the read handed to the PLEG
//     (its ObservePodStatus). A runtime with GetPodStatusAfterSync
//     (*kuberuntime.Manager) reads only the objects the sync knew of and made,
//     without listing, unless a step failed. The pod worker's next sync then waits for
//     a cached status at least as new as the end of the runtime sync, not
//     of the whole sync (the kubelet's rule), so the handed-over read
//     serves it at once: a pod that needs a second sync (its app container
//     after its sidecar) does not wait for the next relist. After a runtime
//     sync that did nothing, any status newer than the one it used serves
//     (an exit reported while it ran, for one).
//   - SyncTerminatingPod: liveness and startup probes stop, the runtime
//     kills the pod within the grace period, the pod's runtime status is
//     read again and any container still running is an error
//     (ErrPodStillRunning: retried); the status, amended by the kill's
//     status function, is recorded.
//   - SyncTerminatingRuntimePod: an orphan only the runtime knows is killed
//     with a 1s grace.
//   - SyncTerminatedPod: volumes are unmounted, the cgroup removed, and the
//     status made final (StatusManager.TerminatePod).
//
// # Retry timings
//
// When the agent acts, with the default periods and jitter off
// (Config.Rand returning 0; by default the pod workers stretch each
// requeue delay by up to 50% at random). Times are from the pod's
// arrival; everything the agent does itself takes no time on a fake
// clock, so these are exact there (package nodekittest holds them):
//
//   - A new pod is synced at once: its sandbox and containers start in the
//     instant it arrives (at start, once the PLEG's first relist ran).
//   - The PLEG relists every second; a change the agent did not make
//     itself (a container exiting on its own) is seen at the next relist,
//     and its event syncs the pod at once.
//   - A failed sync (CreateContainer failed, an image pull failed, a
//     volume not ready) is retried BackOffPeriod (10s) later, or earlier
//     by any PLEG event of the pod: a CreateContainer that fails right
//     after the pod's sandbox was made is retried at 1s, when the relist
//     sees the new sandbox.
//   - A container that exited is restarted at the sync that sees it when
//     it has no back-off yet (its first exit: at the next relist); after
//     that it is in the runtime engine's crash-loop back-off (10s doubling
//     to 5m, from its exit; reset after 10 minutes without an exit): the
//     sync that sees the exit fails with CrashLoopBackOff and the pod
//     worker retries every BackOffPeriod, and the first retry at or after
//     the end of the back-off restarts it. A container that exits as soon
//     as it starts therefore starts at 0, 1, 12, 33, 74, 155 and 316 s
//     (nodekittest.CrashLoopStarts), not at 0, 10, 30, 70 s: as in the
//     kubelet, a restart waits for the pod worker's next retry.
//   - The prober is told of a pod at the end of each of its syncs, once the
//     status is recorded, so a new probe worker (jitter off) first probes
//     in the instant its container started, then every period; after
//     failureThreshold failures in a row the container is killed and
//     restarted in the same sync. The worker keeps its ticks across
//     restarts: period 5s, threshold 3 restarts at 10s and then 25s.
//   - Eviction (package eviction) runs every 10s from the agent's start: a
//     pod is evicted at the first cycle after its node crossed a threshold,
//     and its Failed status is reported the instant its containers
//     stopped.
//   - A synced pod is synced again every ResyncInterval (1m).
//
// # Directories
//
// With Config.Root set, every pod gets Root/pods/<uid>/containers (mode
// 0750) before it starts; the UID is checked to be one safe path segment
// first (ErrUnsafePath). Its volumes and plugins directories are made by
// what mounts there (the volume manager), not for every pod. Housekeeping removes the
// directory of a pod that is gone once sources are ready, the pod workers
// allow its content to be removed and nothing of it runs; volumes and
// plugins are only cleared of empty directories (never files, never across
// a mount point), so a directory with a volume still mounted is kept.
//
// # Metrics
//
// With Config.Registerer: kubelet_running_pods, kubelet_running_containers
// {container_state} (refreshed by housekeeping),
// nodekit_syncloop_config_updates_total{source,op},
// nodekit_syncloop_admission_rejections_total{reason},
// nodekit_syncloop_pleg_events_total{type},
// nodekit_syncloop_housekeeping_duration_seconds and the pod workers'
// kubelet_pod_worker_duration_seconds{operation_type}.
package syncloop
