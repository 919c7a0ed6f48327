// Package eviction is nodekit's node-pressure eviction manager: it watches
// memory, disk and process-table signals against thresholds, reports the
// MemoryPressure, DiskPressure and PIDPressure conditions, rejects pods the
// node cannot take, and evicts one pod per cycle when a threshold has been
// met for its grace period, as the kubelet's eviction manager does.
//
// Thresholds come from the kubelet's flags:
//
//	ts, err := eviction.ParseThresholds(
//		map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, // hard
//		map[string]string{"memory.available": "300Mi"},                            // soft
//		map[string]string{"memory.available": "1m30s"},                            // soft grace
//		map[string]string{"memory.available": "50Mi"})                             // min reclaim
//
// Parsing follows the kubelet ("0%" and "100%" disable a threshold; an
// unknown signal, a percentage outside 0..100, a non-positive quantity or a
// soft threshold without grace are errors) and is stricter where the kubelet
// is unsafe: NaN%, Inf%, hex floats, exponents beyond ±30 and statements over
// 64 bytes are ErrInvalidThreshold errors naming the signal, checked before
// resource.ParseQuantity could hang on them. DefaultThresholds gives the
// kubelet's defaults.
//
// The manager:
//
//	m, err := eviction.New(eviction.Config{
//		Thresholds:  ts,
//		Stats:       stats,          // eviction.StatsProvider: one Summary per cycle
//		ActivePods:  podsFn,         // the pods that may be evicted
//		KillPod:     killThroughPodWorkers,
//		ContainerGC: gc, ImageGC: images, // optional: disk reclaim before eviction
//	})
//	go m.Run(ctx)                    // SyncOnce every 10s until ctx is done
//	ok, reason, msg := m.Admit(pod, active)
//
// One cycle (SyncOnce): a threshold is met when the signal's available amount
// is strictly below it; once met it stays met until available reaches the
// threshold plus its minimum reclaim. Met thresholds raise their node
// condition at once, grace ignored, and the condition is held for
// PressureTransitionPeriod (5m) after it was last seen. A threshold acts only
// after it has been met for its GracePeriod and when the stats are newer than
// the last cycle's. Memory signals act first. For disk, container GC then
// image GC run and the node is measured again; if no threshold is met any
// more, nobody is evicted. Otherwise the active pods are ranked and the first
// one that is not critical (static, mirror, or priority >= 2e9) is killed
// with an Evicted status (phase Failed, reason "Evicted", the kubelet's
// message, a DisruptionTarget condition) and a grace of 1s for a hard
// threshold or min(MaxPodGracePeriodSeconds, the pod's grace) for a soft one.
//
// Ranking: memory — pods without stats, then pods over their memory request,
// then lower priority, then more usage above request; disk — the same over
// the pod's disk use and ephemeral-storage request (with a dedicated image
// file system, nodefs counts logs and volumes, imagefs writable layers);
// pid — lower priority, then pods without stats, then more processes.
//
// Admission: with no pressure, or for a critical pod, admit; under memory
// pressure alone, admit all but BestEffort pods that do not tolerate
// node.kubernetes.io/memory-pressure:NoSchedule; under any other pressure
// reject, with reason "Evicted" and "The node had condition: [..]. ".
//
// Stats: CgroupStats (NewCgroupStats) reads the node's and the pods
// cgroup's memory working set (usage - inactive_file, cgroup v1 or v2), each
// pod cgroup's working set and process count, statfs of the node and image
// file systems, and the process table from /proc. With
// CgroupStatsConfig.ContainerStats (a CRI client's ListContainerStats) it
// adds each pod's containers, by the io.kubernetes.pod.uid and
// io.kubernetes.container.name labels, with their writable layers
// (RootfsBytes/Inodes) and working sets; pods with containers but no pod
// cgroup are reported from these alone. With PodLogsRoot it measures each
// pod's log directory, <root>/<namespace>_<name>_<uid>, and each container's
// in it (LogsBytes); with PodsDir the disk-backed emptyDir volumes under
// <PodsDir>/<uid>/volumes/kubernetes.io~empty-dir (VolumeBytes; a volume on
// another file system, a medium Memory tmpfs, is skipped). The walks count
// allocated blocks and inodes, never follow symbolic links or cross file
// systems, stop 64 levels down and when ctx ends. With
// CgroupStatsConfig.BackgroundDiskUsage (the Builder's choice) the walks
// run in CgroupStats.Run, a walker with its own period, and Summary only
// reads their last results: a pod with millions of files costs the cycle
// nothing (BenchmarkSyncOnceHugeEmptyDir). A failing CRI call or an
// unreadable directory is logged and that part left out: the rest of the
// Summary, memory included, is still returned. FakeStats returns a Summary
// set by a test.
//
// Disk reclaim: package eviction/imagegc's Manager is an ImageGC (the
// kubelet's image garbage collector, which also runs on its own).
//
// Allocatable: with Config.EnforceAllocatable (or WithAllocatableThresholds)
// each hard memory.available threshold gets an allocatableMemory.available
// twin, as the kubelet adds when node allocatable is enforced on pods.
//
// Notifiers: Config.Notifiers (ThresholdNotifier, such as MemcgNotifier)
// are started by Run and re-armed after every cycle that observed memory;
// a crossing they report, or a call to Trigger, runs a cycle at once
// (coalesced) instead of at the next Interval tick.
//
// Local storage: every cycle first evicts, as the kubelet's
// localStorageEviction does, each pod over a local storage limit: an
// emptyDir's use above its sizeLimit, the pod's use (writable layers, logs
// and emptyDirs) above its ephemeral-storage limit, or a container's logs
// and writable layer (logs only when images have their own file system)
// above the container's limit; grace 1s, reason Evicted and the kubelet's
// messages, no DisruptionTarget condition. Those evictions skip the rest of
// the cycle. Config.DisableLocalStorageCapacityIsolation turns it off.
//
// Containerfs thresholds are derived from the nodefs or imagefs ones as in
// the kubelet (UpdateContainerFsThresholds), from the file system layout
// of the first Summary.
package eviction
