// Package containermgr is nodekit's container manager: the cgroup tree that
// pods run in, each pod's cgroup values, and node allocatable.
//
// # Cgroups
//
// A CgroupName is a list of parts ({kubepods, burstable, pod<uid>}); parts
// holding '/' or '_' are errors. The cgroupfs driver spells it
// /kubepods/burstable/pod<uid>, the systemd driver as nested slices
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice,
// '-' in a part becoming '_'). CgroupManager creates, updates and removes
// cgroups by writing control files: on cgroup v1 in each controller's
// hierarchy (cpu.shares, cpu.cfs_quota_us, cpu.cfs_period_us,
// memory.limit_in_bytes, pids.max, hugetlb), on v2 in one directory
// (cpu.weight from shares by 1+(shares-2)*9999/262142, cpu.max,
// memory.max, pids.max). On a real hierarchy the writes go through
// github.com/opencontainers/cgroups (confined to the cgroup mount); an
// emulated root (a plain directory, for tests) gets the files created.
//
// DetectMode reports the host's layout: unified (v2), v1, or hybrid (v1
// controllers plus a v2 mount at unified/, used as v1). The systemd driver
// only names directories the systemd way; the manager writes them itself
// and does not talk to systemd.
//
// # QoS tree and pod cgroups
//
// Start makes the pods cgroup (Config.PodsCgroup, default "kubepods";
// Guaranteed pods go straight in it) with the enforced allocatable limit,
// and its burstable and besteffort children. besteffort always has 2
// shares; burstable gets the sum of the Burstable pods' cpu requests,
// updated before each new pod cgroup, after each removal and every
// QOSUpdatePeriod by Run. ResourceConfigForPod gives a pod's values
// (Guaranteed: shares, quota, memory; Burstable: shares, quota only when
// every container limits cpu, memory only when every container limits
// memory; BestEffort: 2 shares), following the kubelet's rules for init
// containers, sidecars, pod-level resources and pod overhead.
//
// # Node allocatable
//
// NodeAllocatable is capacity minus system-reserved, kube-reserved and the
// hard eviction thresholds (percentages computed in float32 as the kubelet
// does), minus hugepages from memory: what node status reports and the
// resource-fit admission uses. The limit put on the pods cgroup leaves the
// eviction thresholds out, so eviction acts before the OOM killer. A
// reservation above capacity fails Start.
//
// # Wiring
//
//	mgr, err := containermgr.New(containermgr.Config{
//		SystemReserved: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")},
//	})
//	agent, err := nodekit.NewBuilder().
//		WithCgroups(mgr, mgr).                // EnsurePodCgroup/DestroyPodCgroup, PodCgroupParent
//		WithNodeAllocatable(mgr.NodeAllocatable).
//		WithPart("containermgr", mgr.Run).    // Start, then periodic QoS update
//		Build()
//
// The hooks start the manager themselves when the sync loop reaches a pod
// before Run has. CleanupOrphans(ctx, activePods, sourcesReady) removes
// the cgroups of pods that are gone, never before every pod source is
// ready; processes left in them are killed, with a warning in the log.
package containermgr
