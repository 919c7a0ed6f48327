package volumemgr

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
)

// Names of the per-pod dirs the volume manager reads and writes.
const (
	volumesDirName  = "volumes"
	subPathsDirName = "volume-subpaths"
)

// Reconstruct scans PodsDir/<uid>/volumes/<escaped plugin>/<volume> (after
// an agent restart) and adds every volume found to the actual state as
// uncertain: it counts as not mounted, so a pod that still wants it has it
// set up again, and once the populator HasAddedPods the reconciler tears
// down those no pod wants. Dirs of plugins that are not configured are
// kept aside and cleaned (unmounted with the Mounter, removed when empty)
// once HasAddedPods, unless a pod wants a volume of that name. Pod UIDs,
// plugin dirs and volume names that are not single safe path segments are
// skipped and logged, never followed; symlinks are never followed. A
// missing PodsDir is not an error. Run calls it once before the loops
// start.
func (m *Manager) Reconstruct(ctx context.Context) error {
	r := m.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	pods, err := os.ReadDir(m.cfg.PodsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	added, orphans := 0, 0
	for _, pe := range pods {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !pe.IsDir() {
			continue
		}
		uid := pe.Name()
		if err := ValidateSegment(uid); err != nil {
			m.log.Warn("skipping pod dir with an unsafe name", zap.Error(err))
			continue
		}
		volumesDir := filepath.Join(m.cfg.PodsDir, uid, volumesDirName)
		plugins, err := os.ReadDir(volumesDir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				m.log.Warn("cannot read volumes dir", zap.String("path", volumesDir), zap.Error(err))
			}
			continue
		}
		for _, ple := range plugins {
			if !ple.IsDir() {
				continue
			}
			if err := ValidateSegment(ple.Name()); err != nil {
				m.log.Warn("skipping plugin dir with an unsafe name", zap.Error(err))
				continue
			}
			pluginName := UnescapePluginName(ple.Name())
			pluginDir := filepath.Join(volumesDir, ple.Name())
			vols, err := os.ReadDir(pluginDir)
			if err != nil {
				m.log.Warn("cannot read plugin dir", zap.String("path", pluginDir), zap.Error(err))
				continue
			}
			plugin := PluginByName(m.plugins, pluginName)
			for _, ve := range vols {
				name := ve.Name()
				if err := ValidateSegment(name); err != nil {
					m.log.Warn("skipping volume dir with an unsafe name", zap.Error(err))
					continue
				}
				dir := filepath.Join(pluginDir, name)
				if plugin == nil {
					r.orphans = append(r.orphans, orphanVolume{uid: types.UID(uid), name: name, pluginName: pluginName, dir: dir})
					orphans++
					continue
				}
				if m.asw.addUncertain(types.UID(uid), &mountedVolume{
					uniqueName: pluginName + "/" + uid + "-" + name,
					name:       name,
					pluginName: pluginName,
					plugin:     plugin,
					dir:        dir,
				}) {
					added++
				} else if m.asw.dirOf(types.UID(uid), name) != dir {
					// A second plugin dir with the same volume name.
					r.orphans = append(r.orphans, orphanVolume{uid: types.UID(uid), name: name, pluginName: pluginName, dir: dir})
				}
			}
		}
	}
	m.log.Info("volumes reconstructed from disk", zap.Int("uncertain", added), zap.Int("unknownPlugin", orphans))
	if added > 0 {
		m.notify()
	}
	return nil
}
