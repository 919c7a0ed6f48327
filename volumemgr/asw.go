package volumemgr

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// mountedVolume is one volume set up for one pod.
type mountedVolume struct {
	uniqueName string
	name       string
	pluginName string
	plugin     Plugin // nil never: volumes of unknown plugins are not added
	dir        string
	hostPath   string // what to bind into containers ("" while uncertain)
	pod        *v1.Pod
	vol        *v1.Volume // nil for a reconstructed volume not yet set up again

	// uncertain: found on disk after a restart, not set up by this
	// process; it counts as not mounted until SetUp succeeds again.
	uncertain bool
	// remount: the content follows objects or pod metadata and must be
	// projected again (set by the populator when it reprocesses the pod).
	remount bool
	// subPaths are the bind mounts ContainerMounts made from this volume,
	// by target path, undone before the volume is torn down.
	subPaths map[string]func() error
}

// actualState is the actual state of world: what is set up, per pod.
type actualState struct {
	mu   sync.RWMutex
	pods map[types.UID]map[string]*mountedVolume
}

func newActualState() *actualState {
	return &actualState{pods: map[types.UID]map[string]*mountedVolume{}}
}

// markMounted records a successful SetUp of the pod's volume.
func (a *actualState) markMounted(uid types.UID, dv *desiredVolume, hostPath string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vols := a.pods[uid]
	if vols == nil {
		vols = map[string]*mountedVolume{}
		a.pods[uid] = vols
	}
	mv := vols[dv.name]
	if mv == nil {
		mv = &mountedVolume{}
		vols[dv.name] = mv
	}
	mv.uniqueName, mv.name, mv.pluginName, mv.plugin = dv.uniqueName, dv.name, dv.plugin.Name(), dv.plugin
	mv.dir, mv.hostPath, mv.pod, mv.vol = dv.dir, hostPath, dv.pod, dv.vol
	mv.uncertain, mv.remount = false, false
}

// addUncertain records a volume found on disk (reconstruction). An entry
// that already exists is left alone.
func (a *actualState) addUncertain(uid types.UID, mv *mountedVolume) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	vols := a.pods[uid]
	if vols == nil {
		vols = map[string]*mountedVolume{}
		a.pods[uid] = vols
	}
	if _, ok := vols[mv.name]; ok {
		return false
	}
	mv.uncertain = true
	vols[mv.name] = mv
	return true
}

// remove forgets the pod's volume.
func (a *actualState) remove(uid types.UID, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	vols := a.pods[uid]
	if _, ok := vols[name]; !ok {
		return
	}
	delete(vols, name)
	if len(vols) == 0 {
		delete(a.pods, uid)
	}
}

// state reports whether the pod's volume is known, and whether it is
// mounted for sure and needs no remount.
func (a *actualState) state(uid types.UID, name string) (known, mounted, remount bool) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	mv := a.pods[uid][name]
	if mv == nil {
		return false, false, false
	}
	return true, !mv.uncertain, mv.remount
}

// markRemountRequired flags the pod's volumes whose plugin re-projects
// content on resync.
func (a *actualState) markRemountRequired(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, mv := range a.pods[uid] {
		if mv.plugin.RequiresRemount() {
			mv.remount = true
		}
	}
}

// appendAll appends a copy of every known volume with its pod UID to buf.
func (a *actualState) appendAll(buf []podMountedVolume) []podMountedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for uid, vols := range a.pods {
		for _, mv := range vols {
			buf = append(buf, podMountedVolume{uid: uid, name: mv.name, plugin: mv.plugin, dir: mv.dir})
		}
	}
	return buf
}

// podMountedVolume identifies a volume to unmount.
type podMountedVolume struct {
	uid    types.UID
	name   string
	plugin Plugin
	dir    string
}

// mountedForPod returns the pod's volumes that are mounted for sure.
func (a *actualState) mountedForPod(uid types.UID) map[string]MountedVolume {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make(map[string]MountedVolume, len(a.pods[uid]))
	for name, mv := range a.pods[uid] {
		if mv.uncertain {
			continue
		}
		out[name] = MountedVolume{
			Name: mv.name, UniqueName: mv.uniqueName, PluginName: mv.pluginName,
			Dir: mv.dir, HostPath: mv.hostPath, Volume: mv.vol,
		}
	}
	return out
}

// isMounted reports whether the pod's volume is mounted for sure.
func (a *actualState) isMounted(uid types.UID, name string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	mv := a.pods[uid][name]
	return mv != nil && !mv.uncertain
}

// podHasVolumes reports whether anything of the pod is still set up
// (uncertain volumes included: they may hold mounts).
func (a *actualState) podHasVolumes(uid types.UID) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.pods[uid]) > 0
}

// podVolumeUniqueNames returns the unique names of the pod's volumes, sorted.
func (a *actualState) podVolumeUniqueNames(uid types.UID) []string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]string, 0, len(a.pods[uid]))
	for _, mv := range a.pods[uid] {
		out = append(out, mv.uniqueName)
	}
	sort.Strings(out)
	return out
}

// addSubPath records a subPath bind mount of the pod's volume. When the
// volume is no longer set up it returns false and the caller undoes the
// mount. A previous mount on the same target is returned for undoing.
func (a *actualState) addSubPath(uid types.UID, name, target string, cleanup func() error) (prev func() error, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mv := a.pods[uid][name]
	if mv == nil || mv.uncertain {
		return nil, false
	}
	if mv.subPaths == nil {
		mv.subPaths = map[string]func() error{}
	}
	prev = mv.subPaths[target]
	mv.subPaths[target] = cleanup
	return prev, true
}

// takeSubPath removes and returns the cleanup recorded for target.
func (a *actualState) takeSubPath(uid types.UID, name, target string) func() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	mv := a.pods[uid][name]
	if mv == nil {
		return nil
	}
	c := mv.subPaths[target]
	delete(mv.subPaths, target)
	return c
}

// takeSubPaths removes and returns every subPath cleanup of the volume.
func (a *actualState) takeSubPaths(uid types.UID, name string) map[string]func() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	mv := a.pods[uid][name]
	if mv == nil {
		return nil
	}
	out := mv.subPaths
	mv.subPaths = nil
	return out
}

// dirOf returns the dir of the pod's volume, or "".
func (a *actualState) dirOf(uid types.UID, name string) string {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if mv := a.pods[uid][name]; mv != nil {
		return mv.dir
	}
	return ""
}

// counts adds the number of known volumes per plugin name into m.
func (a *actualState) counts(m map[string]int) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, vols := range a.pods {
		for _, mv := range vols {
			m[mv.pluginName]++
		}
	}
}

// uniqueNames adds the unique name of every known volume to set.
func (a *actualState) uniqueNames(set map[string]struct{}) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, vols := range a.pods {
		for _, mv := range vols {
			set[mv.uniqueName] = struct{}{}
		}
	}
}
