package syncloop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// Directory layout under Config.Root.
const (
	// PodsDirName holds one directory per pod, named by its UID.
	PodsDirName = "pods"
	// PodVolumesDirName, PodPluginsDirName and PodContainersDirName are the
	// subdirectories of a pod's directory.
	PodVolumesDirName    = "volumes"
	PodPluginsDirName    = "plugins"
	PodContainersDirName = "containers"
	// podDirMode is the mode pod directories are made with.
	podDirMode = 0o750
)

// PodDir returns root/pods/<uid>. The UID must be one safe path segment (no
// '/', no NUL, not "." or ".."), else the error wraps ErrUnsafePath.
func PodDir(root string, uid types.UID) (string, error) {
	if err := checkSegment(string(uid)); err != nil {
		return "", err
	}
	return filepath.Join(root, PodsDirName, string(uid)), nil
}

// checkSegment refuses anything that is not a single, plain path segment.
func checkSegment(s string) error {
	switch {
	case s == "", s == ".", s == "..":
		return fmt.Errorf("%w: %q", ErrUnsafePath, s)
	case len(s) > 255:
		return fmt.Errorf("%w: %d bytes", ErrUnsafePath, len(s))
	case strings.ContainsAny(s, "/\\\x00"):
		return fmt.Errorf("%w: %q", ErrUnsafePath, s)
	}
	return nil
}

func isAbsClean(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// podDirs manages the pod directories under root ("" = none). Its zero
// value (with a root) is ready to use; it must not be copied once used.
type podDirs struct {
	root string

	// mu guards made: the UIDs whose directories ensure made (or found)
	// and remove has not been asked to delete since. Directories are only
	// removed through remove, so ensure skips the file system for them.
	mu   sync.Mutex
	made map[types.UID]struct{}
}

// ensure makes root/pods/<uid>/containers, once per pod (until remove is
// called for it).
func (d *podDirs) ensure(uid types.UID) error {
	if d.root == "" {
		return nil
	}
	d.mu.Lock()
	_, done := d.made[uid]
	d.mu.Unlock()
	if done {
		return nil
	}
	dir, err := PodDir(d.root, uid)
	if err != nil {
		return err
	}
	if err := fsutil.MkdirAll(dir, podDirMode); err != nil {
		return fmt.Errorf("syncloop: making pod directory: %w", err)
	}
	// volumes and plugins are made by what puts something there (the
	// volume manager): most pods have nothing to mount, and each mkdir
	// costs an inode allocation.
	if err := fsutil.MkdirAll(filepath.Join(dir, PodContainersDirName), podDirMode); err != nil {
		return fmt.Errorf("syncloop: making pod directory: %w", err)
	}
	d.mu.Lock()
	if d.made == nil {
		d.made = make(map[types.UID]struct{})
	}
	d.made[uid] = struct{}{}
	d.mu.Unlock()
	return nil
}

// forget drops uid from the pods whose directories are known to exist.
func (d *podDirs) forget(uid types.UID) {
	d.mu.Lock()
	delete(d.made, uid)
	d.mu.Unlock()
}

// list returns the UIDs that have a directory (entries that are not safe
// segments are skipped).
func (d *podDirs) list() ([]types.UID, error) {
	if d.root == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(filepath.Join(d.root, PodsDirName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []types.UID
	for _, e := range entries {
		if e.IsDir() && checkSegment(e.Name()) == nil {
			out = append(out, types.UID(e.Name()))
		}
	}
	return out, nil
}

// remove deletes a gone pod's directory. Its volumes and plugins
// directories are only emptied of empty directories (never files, never
// across a mount point): if anything is left there, likely a volume still
// mounted, the directory is kept and removed reports false.
func (d *podDirs) remove(uid types.UID) (bool, error) {
	if d.root == "" {
		return true, nil
	}
	// Whatever happens below, the directories may be partly gone.
	d.forget(uid)
	dir, err := PodDir(d.root, uid)
	if err != nil {
		return false, err
	}
	top, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !top.IsDir() {
		return false, fmt.Errorf("syncloop: %s is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	kept := false
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.Name() == PodVolumesDirName || e.Name() == PodPluginsDirName {
			if !removeEmptyDirs(p, deviceOf(top)) {
				kept = true
			}
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return false, err
		}
	}
	if kept {
		return false, nil
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	return true, nil
}

// removeEmptyDirs removes p if it is a tree of empty directories on device
// dev; it reports whether p is gone.
func removeEmptyDirs(p string, dev uint64) bool {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil || !fi.IsDir() || deviceOf(fi) != dev {
		return false
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return false
	}
	empty := true
	for _, e := range entries {
		if !removeEmptyDirs(filepath.Join(p, e.Name()), dev) {
			empty = false
		}
	}
	if !empty {
		return false
	}
	return os.Remove(p) == nil
}

// deviceOf is the device a file is on (0 when unknown).
func deviceOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev) //nolint:unconvert // Dev's type varies by platform
	}
	return 0
}
