// Package memorymanager accounts NUMA-node memory and hugepages for
// Guaranteed pods, as the kubelet's memory manager does with
// --memory-manager-policy=Static (PolicyNone, the default, does nothing).
//
// The machine's memory per NUMA node comes from sysfs (ReadMachine, root
// injectable for tests). The reserved memory per node (Config.ReservedMemory,
// the kubelet's --reserved-memory) must add up, per resource type, to the
// node allocatable reservation: system-reserved + kube-reserved + hard
// eviction threshold (ValidateReservedMemory); Static needs some.
//
// Every container of a Guaranteed pod is given its memory and hugepage
// limits on the smallest group of NUMA nodes that holds them (one node if
// any fits, else two, ...), where a node already used by allocations over a
// different group cannot join; no fit is an admission error wrapping
// ErrNoFit. State is the checkpoint memory_manager_state in StateDir, written
// atomically before a change is reported. A corrupt, foreign or impossible
// file is set aside as *.corrupt (never a refusal to start); then, as when
// the file is missing, StartWithActivePods rebuilds the state from the
// active pods: their Guaranteed pods are accounted again, oldest first, as
// admission would place them (single-NUMA machines: all on node 0); a pod
// that no longer fits is left out and logged. Since the NUMA nodes do not
// reach the runtime, the accounting is the only record of placement, so
// this loses nothing real. Start(ctx) is StartWithActivePods(ctx, nil),
// which rebuilds nothing.
//
//	mgr, err := memorymanager.New(memorymanager.Config{Policy: memorymanager.PolicyStatic,
//		Machine: nodes, ReservedMemory: reserved, NodeAllocatableReservation: reservation, StateDir: dir})
//	err = mgr.StartWithActivePods(ctx, activePods)
//	ok, reason, msg := mgr.Admit(pod, active) // adapter to syncloop.AdmitHandler: see package cpumanager
//	err = mgr.RemovePod(uid)                  // when the pod has terminated
//
// Not done (kubelet features): topology manager hints, the NUMA nodes not
// reaching the runtime (cpuset.mems), reuse of init containers' memory by
// app containers, the BestEffort policy, and a stale-state purge.
package memorymanager
