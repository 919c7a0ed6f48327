package eviction

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Resources the manager reclaims, by signal.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

func signalResource(s Signal) v1.ResourceName {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return v1.ResourceMemory
	case SignalNodeFsAvailable, SignalImageFsAvailable, SignalContainerFsAvailable:
		return v1.ResourceEphemeralStorage
	case SignalNodeFsInodesFree, SignalImageFsInodesFree, SignalContainerFsInodesFree:
		return resourceInodes
	case SignalPIDAvailable:
		return resourcePIDs
	}
	return ""
}

func signalCondition(s Signal) v1.NodeConditionType {
	switch signalResource(s) {
	case v1.ResourceMemory:
		return v1.NodeMemoryPressure
	case v1.ResourceEphemeralStorage, resourceInodes:
		return v1.NodeDiskPressure
	case resourcePIDs:
		return v1.NodePIDPressure
	}
	return ""
}

// rankKey is one pod's sort key; smaller ranks first (evicted first).
type rankKey struct {
	pod      *v1.Pod
	missing  bool // no stats: first
	exceeds  bool // usage above request: first
	priority int32
	excess   int64 // usage minus request (or usage): larger first
	idx      int   // position in the input: ties keep it
}

// rank orders pods for eviction under pressure on signal, in place.
// Memory: no stats, then usage over request, then lower priority, then
// larger usage above request. Disk: the same over the measured disk usage
// and the ephemeral-storage request. PID: lower priority, then no stats,
// then more processes.
func rank(pods []*v1.Pod, signal Signal, stats map[types.UID]*PodStats, dedicatedImageFs bool) {
	res := signalResource(signal)
	keys := make([]rankKey, len(pods))
	for i, p := range pods {
		k := rankKey{pod: p, priority: podPriority(p), idx: i}
		st, ok := stats[p.UID]
		k.missing = !ok
		if ok {
			switch res {
			case v1.ResourceMemory:
				use := int64(st.MemoryWorkingSetBytes)
				req := podRequest(p, v1.ResourceMemory)
				k.exceeds, k.excess = use > req, use-req
			case resourcePIDs:
				k.excess = int64(st.Processes)
			case v1.ResourceEphemeralStorage, resourceInodes:
				use := diskUse(st, signal, res, dedicatedImageFs)
				var req int64
				if res == v1.ResourceEphemeralStorage {
					req = podRequest(p, v1.ResourceEphemeralStorage)
				}
				k.exceeds, k.excess = use > req, use-req
			}
		}
		keys[i] = k
	}
	cmpBool := func(a, b bool) int { // true first
		switch {
		case a == b:
			return 0
		case a:
			return -1
		}
		return 1
	}
	cmpPrio := func(a, b rankKey) int {
		switch {
		case a.priority < b.priority:
			return -1
		case a.priority > b.priority:
			return 1
		}
		return 0
	}
	cmpExcess := func(a, b rankKey) int {
		switch {
		case a.excess > b.excess:
			return -1
		case a.excess < b.excess:
			return 1
		}
		return a.idx - b.idx // a total order: the unstable sort is stable
	}
	if res == resourcePIDs {
		slices.SortFunc(keys, func(a, b rankKey) int {
			if c := cmpPrio(a, b); c != 0 {
				return c
			}
			if c := cmpBool(a.missing, b.missing); c != 0 {
				return c
			}
			return cmpExcess(a, b)
		})
	} else {
		slices.SortFunc(keys, func(a, b rankKey) int {
			if c := cmpBool(a.missing, b.missing); c != 0 {
				return c
			}
			if c := cmpBool(a.exceeds, b.exceeds); c != 0 {
				return c
			}
			if c := cmpPrio(a, b); c != 0 {
				return c
			}
			return cmpExcess(a, b)
		})
	}
	for i := range keys {
		pods[i] = keys[i].pod
	}
}

// diskUse is the pod's use of the file system behind signal: with a
// dedicated image file system, nodefs counts logs and volumes and
// imagefs/containerfs count writable layers; without one, all of them.
func diskUse(st *PodStats, signal Signal, res v1.ResourceName, dedicatedImageFs bool) int64 {
	rootfs, logs, vols := st.RootfsBytes, st.LogsBytes, st.VolumeBytes
	if res == resourceInodes {
		rootfs, logs, vols = st.RootfsInodes, st.LogsInodes, st.VolumeInodes
	}
	if !dedicatedImageFs {
		return int64(rootfs + logs + vols)
	}
	switch signal {
	case SignalNodeFsAvailable, SignalNodeFsInodesFree:
		return int64(logs + vols)
	}
	return int64(rootfs)
}
