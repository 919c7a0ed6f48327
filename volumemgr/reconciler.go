package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
)

// Retry back-off of a failing SetUp or TearDown (the kubelet's operation
// back-off: 500ms doubling up to 2m2s).
const (
	initialRetryDelay = 500 * time.Millisecond
	maxRetryDelay     = 2*time.Minute + 2*time.Second
)

type volKey struct {
	uid  types.UID
	name string
}

type retryState struct {
	until time.Time
	delay time.Duration
}

// orphanVolume is a volume dir found on disk that could not be
// reconstructed (no plugin by that name): it is cleaned once the desired
// state is complete, unless a pod wants a volume of that name.
type orphanVolume struct {
	uid        types.UID
	name       string
	pluginName string
	dir        string
}

// reconciler makes the actual state follow the desired one.
type reconciler struct {
	m *Manager

	mu      sync.Mutex // one pass at a time
	dbuf    []desiredVolume
	abuf    []podMountedVolume
	retry   map[volKey]retryState
	orphans []orphanVolume
	counts  map[string]int
}

func newReconciler(m *Manager) *reconciler {
	return &reconciler{m: m, retry: map[volKey]retryState{}, counts: map[string]int{}}
}

// ReconcileOnce is one reconciler pass: once the populator HasAddedPods it
// tears down the volumes that are set up but no longer desired (their
// subPath mounts first); it sets up the desired volumes that are not set
// up, uncertain (reconstructed) or marked for a remount; once HasAddedPods
// it cleans the volume dirs found on disk that no plugin knows and no pod
// wants. A failing SetUp or TearDown is retried with back-off; a SetUp
// failure of a volume not yet mounted is recorded for the pod, so that
// WaitForAttachAndMount returns it.
func (m *Manager) ReconcileOnce(ctx context.Context) {
	r := m.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := m.HasAddedPods()
	if ready {
		r.unmountVolumes(ctx)
	}
	r.mountVolumes(ctx)
	if ready {
		r.cleanOrphans(ctx)
	}
	r.updateMetrics()
}

func (r *reconciler) unmountVolumes(ctx context.Context) {
	m := r.m
	r.abuf = m.asw.appendAll(r.abuf[:0])
	for i := range r.abuf {
		v := &r.abuf[i]
		if m.dsw.volumeExists(v.uid, v.name) {
			continue
		}
		key := volKey{v.uid, v.name}
		if !r.mayTry(key) {
			continue
		}
		if err := m.tearDown(ctx, v.uid, v.name, v.plugin, v.dir); err != nil {
			r.failed(key)
			m.log.Warn("volume tear down failed", zap.String("podUID", string(v.uid)),
				zap.String("volume", v.name), zap.Error(err))
			continue
		}
		delete(r.retry, key)
		m.asw.remove(v.uid, v.name)
		m.metrics.observeOp("unmount", nil)
		m.log.Debug("volume torn down", zap.String("podUID", string(v.uid)), zap.String("volume", v.name))
		m.notify()
	}
	r.abuf = clearTail(r.abuf)
}

func (r *reconciler) mountVolumes(ctx context.Context) {
	m := r.m
	r.dbuf = m.dsw.appendVolumes(r.dbuf[:0])
	for i := range r.dbuf {
		dv := &r.dbuf[i]
		uid := dv.pod.UID
		_, mounted, remount := m.asw.state(uid, dv.name)
		if mounted && !remount {
			continue
		}
		key := volKey{uid, dv.name}
		if !r.mayTry(key) {
			continue
		}
		var err error
		if !mounted {
			// The pod's directory and its volumes directory are made
			// here, with the kubelet's mode, if the pod worker has not
			// made the first yet (it makes no volumes directory).
			err = os.MkdirAll(filepath.Join(m.cfg.PodsDir, string(uid), volumesDirName), 0o750)
		}
		if err == nil {
			err = dv.plugin.SetUp(ctx, dv.pod, dv.vol, dv.dir)
		}
		var hostPath string
		if err == nil {
			hostPath, err = dv.plugin.HostPath(dv.pod, dv.vol, dv.dir)
		}
		m.metrics.observeOp("mount", err)
		if err != nil {
			r.failed(key)
			if ctx.Err() != nil {
				break
			}
			m.log.Warn("volume set up failed", zap.String("pod", dv.pod.Namespace+"/"+dv.pod.Name),
				zap.String("volume", dv.name), zap.Bool("remount", mounted), zap.Error(err))
			if !mounted {
				// A remount failure leaves the old content in place and
				// the pod running, as in the kubelet; a first mount
				// failure is the pod's error.
				m.dsw.addError(uid, fmt.Sprintf("MountVolume.SetUp failed for volume %q: %v", dv.name, err))
				m.notify()
			}
			continue
		}
		delete(r.retry, key)
		m.asw.markMounted(uid, dv, hostPath)
		m.notify()
	}
	r.dbuf = clearTail(r.dbuf)
}

// mayTry reports whether the back-off of a failed operation has passed.
func (r *reconciler) mayTry(key volKey) bool {
	st, ok := r.retry[key]
	return !ok || !r.m.clock.Now().Before(st.until)
}

func (r *reconciler) failed(key volKey) {
	st := r.retry[key]
	switch {
	case st.delay == 0:
		st.delay = initialRetryDelay
	case st.delay < maxRetryDelay:
		st.delay = min(2*st.delay, maxRetryDelay)
	}
	st.until = r.m.clock.Now().Add(st.delay)
	r.retry[key] = st
}

// cleanOrphans removes the dirs of unreconstructable volumes no pod wants
// (a one-shot cleanup, as in the kubelet).
func (r *reconciler) cleanOrphans(ctx context.Context) {
	if len(r.orphans) == 0 {
		return
	}
	m := r.m
	for _, o := range r.orphans {
		if m.dsw.volumeExists(o.uid, o.name) {
			continue
		}
		if err := m.cleanSubPaths(ctx, o.uid, o.name); err != nil {
			m.log.Warn("orphan subPath cleanup failed", zap.String("podUID", string(o.uid)),
				zap.String("volume", o.name), zap.Error(err))
		}
		if err := m.cleanOrphanDir(o.dir); err != nil {
			m.log.Warn("orphan volume cleanup failed", zap.String("podUID", string(o.uid)),
				zap.String("volume", o.name), zap.String("plugin", o.pluginName), zap.Error(err))
			continue
		}
		m.log.Info("orphan volume cleaned", zap.String("podUID", string(o.uid)),
			zap.String("volume", o.name), zap.String("plugin", o.pluginName))
	}
	r.orphans = nil
}

func (r *reconciler) updateMetrics() {
	if r.m.metrics == nil {
		return
	}
	clear(r.counts)
	r.m.dsw.counts(r.counts)
	r.m.metrics.setCounts("desired_state_of_world", r.counts)
	clear(r.counts)
	r.m.asw.counts(r.counts)
	r.m.metrics.setCounts("actual_state_of_world", r.counts)
}

// tearDown undoes the volume's subPath mounts, then the volume.
func (m *Manager) tearDown(ctx context.Context, uid types.UID, name string, plugin Plugin, dir string) error {
	if err := m.cleanSubPaths(ctx, uid, name); err != nil {
		return err
	}
	return plugin.TearDown(ctx, dir)
}

// cleanSubPaths unmounts and removes the subPath targets of the pod's
// volume: the ones recorded by ContainerMounts, then any left on disk
// (PodsDir/<uid>/volume-subpaths/<volume>/<container>/<index>, from before
// a restart). Nothing is followed through a symlink.
func (m *Manager) cleanSubPaths(ctx context.Context, uid types.UID, name string) error {
	var errs []error
	for target, cleanup := range m.asw.takeSubPaths(uid, name) {
		if err := cleanup(); err != nil {
			errs = append(errs, fmt.Errorf("subPath %s: %w", target, err))
		}
	}
	volDir := filepath.Join(m.cfg.PodsDir, string(uid), subPathsDirName, name)
	containers, err := os.ReadDir(volDir)
	if errors.Is(err, fs.ErrNotExist) {
		return errors.Join(errs...)
	}
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, c := range containers {
		if err := ctx.Err(); err != nil {
			return err
		}
		cdir := filepath.Join(volDir, c.Name())
		if !c.IsDir() { // a file or a symlink: never entered
			errs = append(errs, os.Remove(cdir))
			continue
		}
		targets, err := os.ReadDir(cdir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, t := range targets {
			p := filepath.Join(cdir, t.Name())
			if m.cfg.Mounter != nil && t.Type()&fs.ModeSymlink == 0 {
				if err := unmountIfMounted(m.cfg.Mounter, p); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		errs = append(errs, removeIfExists(cdir))
	}
	errs = append(errs, removeIfExists(volDir))
	_ = os.Remove(filepath.Dir(volDir)) // volume-subpaths, when empty
	return errors.Join(errs...)
}

// cleanOrphanDir unmounts dir if it is a mount point (with a Mounter) and
// removes it if it is empty; a dir with content no plugin knows is kept.
func (m *Manager) cleanOrphanDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() && m.cfg.Mounter != nil {
		if err := unmountIfMounted(m.cfg.Mounter, dir); err != nil {
			return err
		}
	}
	return removeIfExists(dir)
}

func removeIfExists(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// clearTail zeroes the used part of a reused buffer so that it keeps no
// pods alive, and returns it empty.
func clearTail[T any](s []T) []T {
	clear(s)
	return s[:0]
}
