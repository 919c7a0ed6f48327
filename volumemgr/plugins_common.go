package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/fsutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Default file modes of projected volumes (the API defaults).
const (
	defaultFileMode = 0o644
	// emptyDirMode is the mode of emptyDir (and wrapped) volume dirs.
	emptyDirMode = 0o777
)

// volumeError prefixes err with the volume's name.
func volumeError(plugin string, vol *v1.Volume, err error) error {
	return fmt.Errorf("%s volume %q: %w", plugin, vol.Name, err)
}

// checkSetUpArgs validates what every SetUp gets before any file system call.
func checkSetUpArgs(pod *v1.Pod, vol *v1.Volume, dir string) error {
	if pod == nil || vol == nil {
		return fmt.Errorf("%w: nil pod or volume", ErrUnsupportedVolume)
	}
	if err := ValidateSegment(vol.Name); err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	return checkDir(dir)
}

func checkDir(dir string) error {
	if dir == "" || dir[0] != '/' {
		return fmt.Errorf("%w: volume dir %q must be absolute", ErrUnsafePath, truncForError(dir))
	}
	for i := 0; i < len(dir); i++ {
		if dir[i] == 0 {
			return fmt.Errorf("%w: volume dir contains NUL", ErrUnsafePath)
		}
	}
	return nil
}

// fileMode converts an API mode (*int32) to permission bits, defaulting to
// def; modes outside 0..0777 are errors.
func fileMode(m *int32, def fs.FileMode) (fs.FileMode, error) {
	if m == nil {
		return def, nil
	}
	if *m < 0 || *m > 0o777 {
		return 0, fmt.Errorf("%w: mode %#o outside 0..0777", ErrUnsupportedVolume, *m)
	}
	return fs.FileMode(*m), nil
}

// setUpDir makes dir (0777, as an emptyDir) and, when tmpfs is true, mounts
// a tmpfs of sizeBytes on it unless it is already a mount point. mounted
// reports whether this call mounted it (so a failed first SetUp can undo).
func setUpDir(m Mounter, dir string, tmpfs bool, sizeBytes int64) (mounted bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return false, err
	}
	// The volume dir and the pod's dirs above it must be directories of
	// their own, not symlinks pre-seeded to send a mount (or the files
	// written) elsewhere: checked without following links, before mounting.
	if err := checkNoSymlinks(dir, podDirDepth); err != nil {
		return false, err
	}
	if err := fsutil.EnsureDir(dir, emptyDirMode, false); err != nil {
		return false, fmt.Errorf("%w: %w", ErrPathEscape, err)
	}
	defer func() {
		// Unmount what this call mounted when it then fails.
		if err != nil && mounted {
			if uerr := m.Unmount(dir); uerr == nil {
				mounted = false
			}
		}
	}()
	if tmpfs {
		if m == nil {
			return false, ErrNoMounter
		}
		isMnt, err := m.IsMountPoint(dir)
		if err != nil {
			return false, err
		}
		if !isMnt {
			if err := m.MountTmpfs(dir, sizeBytes); err != nil {
				return false, err
			}
			mounted = true
		}
	}
	// umask may have dropped bits; a tmpfs gets mode=0777 from its options.
	fi, err := os.Lstat(dir)
	if err != nil {
		return mounted, err
	}
	if !fi.IsDir() {
		return mounted, fmt.Errorf("%w: %s is not a directory", ErrPathEscape, dir)
	}
	if fi.Mode().Perm() != emptyDirMode {
		if err := os.Chmod(dir, emptyDirMode); err != nil {
			return mounted, err
		}
	}
	return mounted, nil
}

// podDirDepth is how many directories above a volume dir belong to the pod
// (<uid>/volumes/<plugin>/<volume>): none of them may be a symlink.
const podDirDepth = 3

// checkNoSymlinks refuses dir when it or one of its depth parents is a
// symlink (a missing one is fine: it is created as a directory).
func checkNoSymlinks(dir string, depth int) error {
	for d, i := dir, 0; i <= depth && d != "/" && d != "."; d, i = filepath.Dir(d), i+1 {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link", ErrPathEscape, d)
		}
	}
	return nil
}

// tearDownDir unmounts dir if it is a mount point (when m is set) and
// removes it with its content, never following symlinks. A missing dir is
// not an error.
func tearDownDir(m Mounter, dir string) error {
	if err := checkDir(dir); err != nil {
		return err
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Never unmount through a link: remove the link itself.
		return os.Remove(dir)
	}
	if err := unmountIfMounted(m, dir); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// writeSecretLike sets up dir (tmpfs per policy) and writes payload
// atomically. A failure on a tmpfs this call mounted unmounts it again.
func (c *pluginsConfig) writeVolume(ctx context.Context, pod *v1.Pod, dir string, tmpfs bool, payload map[string]FileProjection) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var size int64
	if tmpfs {
		size = c.memoryVolumeSize(pod, nil)
	}
	mounted, err := setUpDir(c.Mounter, dir, tmpfs, size)
	if err == nil {
		_, err = NewAtomicWriter(dir, c.Clock, c.Logger).Write(payload)
	}
	if err != nil && mounted {
		if uerr := c.Mounter.Unmount(dir); uerr != nil {
			c.Logger.Warn("unmounting after failed set up")
		}
	}
	return err
}

// memoryVolumeSize is the tmpfs size of a memory-backed volume: the node's
// allocatable memory, lowered to the pod's memory limit when every container
// declares one, lowered to sizeLimit when set (each only when > 0). 0: no
// size option.
func (c *pluginsConfig) memoryVolumeSize(pod *v1.Pod, sizeLimit *resource.Quantity) int64 {
	var size int64
	if c.NodeAllocatable != nil {
		if q, ok := c.NodeAllocatable()[v1.ResourceMemory]; ok {
			size = q.Value()
		}
	}
	lower := func(v int64) {
		if v > 0 && (size <= 0 || v < size) {
			size = v
		}
	}
	lower(podMemoryLimit(pod))
	if sizeLimit != nil {
		lower(sizeLimit.Value())
	}
	return size
}

// podMemoryLimit is the pod's memory limit when every container declares
// one (as the kubelet's pod cgroup): the larger of the sum over regular and
// sidecar containers and the largest init container, plus overhead. 0 when
// some container has no limit.
func podMemoryLimit(pod *v1.Pod) int64 {
	if pod == nil {
		return 0
	}
	limit := func(c *v1.Container) (int64, bool) {
		q, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok || q.IsZero() {
			return 0, false
		}
		return q.Value(), true
	}
	var sum, maxInit int64
	for i := range pod.Spec.Containers {
		v, ok := limit(&pod.Spec.Containers[i])
		if !ok {
			return 0
		}
		sum += v
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		v, ok := limit(c)
		if !ok {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += v
			continue
		}
		maxInit = max(maxInit, v)
	}
	total := max(sum, maxInit)
	if q, ok := pod.Spec.Overhead[v1.ResourceMemory]; ok {
		total += q.Value()
	}
	return total
}

// isOptional dereferences an optional flag.
func isOptional(b *bool) bool { return b != nil && *b }

// fsGroupOf returns the pod's fsGroup, or nil.
func fsGroupOf(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}

// applyFsGroup sets FsGroup on every file and adds owner and group read (the
// kubelet's volume ownership for read-only volumes: u+r,g+r).
func applyFsGroup(payload map[string]FileProjection, gid *int64) {
	if gid == nil {
		return
	}
	for p, fp := range payload {
		if fp.FsGroup == nil {
			fp.FsGroup = gid
			fp.Mode |= 0o440
			payload[p] = fp
		}
	}
}

// keySelection is what a configMap or secret volume (or projection source)
// asks for: the object's name, the keys as files (all when items is
// empty), the files' default mode, and whether the object or a key may be
// missing.
type keySelection struct {
	name     string
	items    []v1.KeyToPath
	defMode  *int32
	optional bool
}

// keyPayload projects data (string and binary maps) by sel.items or, with
// no items, every key as its own file, with mode defMode unless an item
// sets one. Missing keys are errors unless sel.optional.
func keyPayload(kind string, sel keySelection, defMode fs.FileMode, data map[string]string, binary map[string][]byte, into map[string]FileProjection) error {
	name, items, optional := sel.name, sel.items, sel.optional
	if len(items) == 0 {
		for k, v := range data {
			if err := ValidateItemPath(k); err != nil {
				return fmt.Errorf("%s %q key: %w", kind, name, err)
			}
			into[k] = FileProjection{Data: []byte(v), Mode: defMode}
		}
		for k, v := range binary {
			if err := ValidateItemPath(k); err != nil {
				return fmt.Errorf("%s %q key: %w", kind, name, err)
			}
			into[k] = FileProjection{Data: v, Mode: defMode}
		}
		return nil
	}
	for _, it := range items {
		if err := ValidateItemPath(it.Path); err != nil {
			return fmt.Errorf("%s %q item for key %q: %w", kind, name, truncForError(it.Key), err)
		}
		var b []byte
		if s, ok := data[it.Key]; ok {
			b = []byte(s)
		} else if bb, ok := binary[it.Key]; ok {
			b = bb
		} else {
			if optional {
				continue
			}
			return fmt.Errorf("%w: %s %q has no key %q", ErrKeyNotFound, kind, name, truncForError(it.Key))
		}
		mode, err := fileMode(it.Mode, defMode)
		if err != nil {
			return fmt.Errorf("%s %q item %q: %w", kind, name, it.Path, err)
		}
		into[it.Path] = FileProjection{Data: b, Mode: mode}
	}
	return nil
}
