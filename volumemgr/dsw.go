package volumemgr

import (
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxPodErrors caps the distinct errors kept per pod between two pops.
const maxPodErrors = 10

// desiredVolume is one volume the populator wants mounted for one pod.
type desiredVolume struct {
	uniqueName string // <plugin>/<podUID>-<volume>
	name       string // the pod's volume name (the kubelet's outer name)
	pod        *v1.Pod
	vol        *v1.Volume
	plugin     Plugin
	dir        string // PodsDir/<uid>/volumes/<escaped plugin>/<name>
}

type desiredPod struct {
	pod     *v1.Pod
	volumes map[string]*desiredVolume // by volume name
}

// desiredState is the desired state of world: the volumes of the pods the
// agent runs that some container mounts. It also keeps per-pod errors
// (volumes that could not be processed, SetUp failures) for the waiters.
type desiredState struct {
	mu     sync.RWMutex
	pods   map[types.UID]*desiredPod
	errors map[types.UID][]string // sorted, unique, capped
}

func newDesiredState() *desiredState {
	return &desiredState{pods: map[types.UID]*desiredPod{}, errors: map[types.UID][]string{}}
}

// addPodVolume adds (or refreshes) the pod's volume. The pod pointer of
// every volume of the pod is updated to pod.
func (d *desiredState) addPodVolume(pod *v1.Pod, dv *desiredVolume) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dp := d.pods[pod.UID]
	if dp == nil {
		dp = &desiredPod{volumes: map[string]*desiredVolume{}}
		d.pods[pod.UID] = dp
	}
	dp.pod = pod
	for _, v := range dp.volumes {
		v.pod = pod
	}
	dp.volumes[dv.name] = dv
}

// deletePod removes every volume of the pod.
func (d *desiredState) deletePod(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, uid)
}

// podUIDs returns the UIDs of the pods with desired volumes.
func (d *desiredState) podUIDs() []types.UID {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]types.UID, 0, len(d.pods))
	for uid := range d.pods {
		out = append(out, uid)
	}
	return out
}

// hasPod reports whether the pod has desired volumes.
func (d *desiredState) hasPod(uid types.UID) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	_, ok := d.pods[uid]
	return ok
}

// volumeExists reports whether the pod's volume of that name is desired.
func (d *desiredState) volumeExists(uid types.UID, name string) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if dp := d.pods[uid]; dp != nil {
		_, ok := dp.volumes[name]
		return ok
	}
	return false
}

// volumeNames returns the names of the pod's desired volumes.
func (d *desiredState) volumeNames(uid types.UID) map[string]struct{} {
	d.mu.RLock()
	defer d.mu.RUnlock()
	dp := d.pods[uid]
	if dp == nil {
		return nil
	}
	out := make(map[string]struct{}, len(dp.volumes))
	for n := range dp.volumes {
		out[n] = struct{}{}
	}
	return out
}

// appendVolumes appends every desired volume to buf (a copy of each entry,
// so the reconciler works without the lock).
func (d *desiredState) appendVolumes(buf []desiredVolume) []desiredVolume {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, dp := range d.pods {
		for _, v := range dp.volumes {
			buf = append(buf, *v)
		}
	}
	return buf
}

// addError records err for the pod (deduplicated, at most maxPodErrors).
func (d *desiredState) addError(uid types.UID, err string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.errors[uid]
	i, found := slices.BinarySearch(errs, err)
	if found || len(errs) >= maxPodErrors {
		return
	}
	d.errors[uid] = slices.Insert(errs, i, err)
}

// popErrors returns the pod's recorded errors, sorted, and forgets them.
func (d *desiredState) popErrors(uid types.UID) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	errs := d.errors[uid]
	delete(d.errors, uid)
	return errs
}

// podsWithErrors returns the UIDs that have recorded errors.
func (d *desiredState) podsWithErrors() []types.UID {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]types.UID, 0, len(d.errors))
	for uid := range d.errors {
		out = append(out, uid)
	}
	return out
}

// counts returns the number of desired volumes per plugin name into m.
func (d *desiredState) counts(m map[string]int) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, dp := range d.pods {
		for _, v := range dp.volumes {
			m[v.plugin.Name()]++
		}
	}
}
