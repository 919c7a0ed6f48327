package volumemgr

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SubPathTarget is the stable private bind target of a container's subPath
// mount, as the kubelet lays it out:
// <podDir>/volume-subpaths/<volume name>/<container name>/<mount index>.
// The names are checked with ValidateSegment.
func SubPathTarget(podDir, volumeName, containerName string, mountIndex int) (string, error) {
	if err := checkDir(podDir); err != nil {
		return "", err
	}
	if err := ValidateSegment(volumeName); err != nil {
		return "", fmt.Errorf("volume name: %w", err)
	}
	if err := ValidateSegment(containerName); err != nil {
		return "", fmt.Errorf("container name: %w", err)
	}
	if mountIndex < 0 {
		return "", fmt.Errorf("%w: negative mount index %d", ErrUnsafePath, mountIndex)
	}
	return filepath.Join(podDir, "volume-subpaths", volumeName, containerName, strconv.Itoa(mountIndex)), nil
}

// OpenSubPath opens subPath beneath volumeDir and returns an O_PATH
// descriptor of it. subPath is validated (ValidateSubPath) first; then it
// is resolved by the kernel with openat2 RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS
// relative to a descriptor of volumeDir (opened without following a symlink
// in its last component): symlinks inside the volume that stay inside it are
// followed, any that lead out (absolute, or through "..") fail with
// ErrPathEscape. The caller closes the descriptor.
func OpenSubPath(volumeDir, subPath string) (fd int, err error) {
	if err := checkDir(volumeDir); err != nil {
		return -1, err
	}
	if err := ValidateSubPath(subPath); err != nil {
		return -1, err
	}
	root, err := openDirNoFollow(unix.AT_FDCWD, volumeDir)
	if err != nil {
		return -1, fmt.Errorf("subPath %q: open volume dir %s: %w", subPath, volumeDir, err)
	}
	defer unix.Close(root)
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err = unix.Openat2(root, subPath, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		break
	}
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		return -1, fmt.Errorf("%w: subPath %q in %s: %w", ErrPathEscape, subPath, volumeDir, err)
	default:
		return -1, fmt.Errorf("subPath %q in %s: %w", subPath, volumeDir, err)
	}
}

// PrepareSubPath resolves subPath beneath volumeDir without following any
// symlink out of it (OpenSubPath) and bind-mounts the opened descriptor
// (through /proc/self/fd/<n>) onto target, so a symlink swapped in after the
// check cannot redirect the mount. target is created if missing (with
// parents, 0750): a dir for a dir, an empty file otherwise; anything already
// mounted on target is left as is and reused only if it is the same inode.
// The returned hostPath is target; cleanup unmounts it and removes target.
// Use SubPathTarget for the kubelet's stable target path. Needs root.
func PrepareSubPath(volumeDir, subPath, target string) (hostPath string, cleanup func() error, err error) {
	if err := checkDir(target); err != nil {
		return "", nil, err
	}
	fd, err := OpenSubPath(volumeDir, subPath)
	if err != nil {
		return "", nil, err
	}
	defer unix.Close(fd)
	var src unix.Stat_t
	if err := unix.Fstat(fd, &src); err != nil {
		return "", nil, fmt.Errorf("subPath %q: %w", subPath, err)
	}
	isDir := src.Mode&unix.S_IFMT == unix.S_IFDIR
	cleanup = func() error { return CleanupSubPath(target) }

	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", nil, fmt.Errorf("subPath %q: %w", subPath, err)
	}
	var tst unix.Stat_t
	err = unix.Lstat(target, &tst)
	switch {
	case err == nil:
		if tst.Mode&unix.S_IFMT == unix.S_IFLNK {
			return "", nil, fmt.Errorf("%w: subPath target %s is a symlink", ErrPathEscape, target)
		}
		if mounted, merr := (&SystemMounter{}).IsMountPoint(target); merr == nil && mounted {
			if tst.Dev == src.Dev && tst.Ino == src.Ino {
				return target, cleanup, nil // already prepared
			}
			if err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW); err != nil {
				return "", nil, fmt.Errorf("subPath %q: unmount stale %s: %w", subPath, target, err)
			}
		}
		if (tst.Mode&unix.S_IFMT == unix.S_IFDIR) != isDir {
			if err := os.Remove(target); err != nil {
				return "", nil, fmt.Errorf("subPath %q: %w", subPath, err)
			}
			err = unix.ENOENT
		}
	case errors.Is(err, unix.ENOENT):
	default:
		return "", nil, fmt.Errorf("subPath %q: %w", subPath, err)
	}
	if errors.Is(err, unix.ENOENT) {
		if isDir {
			err = unix.Mkdir(target, 0o750)
		} else {
			var tfd int
			tfd, err = unix.Open(target, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
			if err == nil {
				unix.Close(tfd)
			}
		}
		if err != nil {
			return "", nil, fmt.Errorf("subPath %q: create target %s: %w", subPath, target, err)
		}
	}
	// The mount source is the descriptor we resolved, not a path that could
	// be swapped: /proc/self/fd/<n> is a magic link to exactly that inode.
	source := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		_ = os.Remove(target)
		return "", nil, fmt.Errorf("subPath %q: bind mount onto %s: %w", subPath, target, err)
	}
	return target, cleanup, nil
}

// CleanupSubPath unmounts target if mounted and removes it. A missing
// target is not an error.
func CleanupSubPath(target string) error {
	if err := checkDir(target); err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(target, &st); errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err := unmountIfMounted(&SystemMounter{}, target); err != nil {
		return err
	}
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// CleanupSubPaths unmounts and removes every subPath target under
// <podDir>/volume-subpaths (after an agent restart, or when the pod is
// gone), deepest mounts first, then removes the tree.
func CleanupSubPaths(podDir string) error {
	if err := checkDir(podDir); err != nil {
		return err
	}
	base := filepath.Join(podDir, "volume-subpaths")
	if _, err := os.Lstat(base); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	points, err := MountPointsUnder(base)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if points[i] == base || !strings.HasPrefix(points[i], base+"/") {
			continue
		}
		if err := unix.Unmount(points[i], unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", points[i], err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Never remove through a mount that is still there (it would delete
	// volume content): check again before removing the tree.
	left, err := MountPointsUnder(base)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("subPath targets still mounted under %s: %s", base, strings.Join(left, ", "))
	}
	return os.RemoveAll(base)
}
