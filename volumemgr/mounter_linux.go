package volumemgr

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// SystemMounter is the real Mounter: mount(2)/umount(2) via
// golang.org/x/sys/unix. Mounting needs root (CAP_SYS_ADMIN).
type SystemMounter struct{}

var _ Mounter = (*SystemMounter)(nil)

// MountTmpfs mounts a tmpfs on target with mode 0777 (as an emptyDir), nodev
// and nosuid, and size=<sizeBytes> when sizeBytes > 0. target is opened
// once (O_PATH|O_NOFOLLOW|O_DIRECTORY) and the tmpfs is mounted through
// that descriptor, so a target that is, or is swapped for, a symlink is
// refused (ErrPathEscape) instead of mounting on the link's target.
func (*SystemMounter) MountTmpfs(target string, sizeBytes int64) error {
	opts := "mode=0777"
	if sizeBytes > 0 {
		opts += ",size=" + strconv.FormatInt(sizeBytes, 10)
	}
	fd, err := unix.Open(target, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		return fmt.Errorf("%w: %s is not a directory of its own (a symbolic link?)", ErrPathEscape, target)
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: target, Err: err}
	}
	defer unix.Close(fd)
	if err := unix.Mount("tmpfs", "/proc/self/fd/"+strconv.Itoa(fd), "tmpfs", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return &os.PathError{Op: "mount tmpfs", Path: target, Err: err}
	}
	return nil
}

// Unmount unmounts target. Not mounted (EINVAL) is an error.
func (*SystemMounter) Unmount(target string) error {
	if err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW); err != nil {
		return &os.PathError{Op: "unmount", Path: target, Err: err}
	}
	return nil
}

// IsMountPoint reports whether path is the root of a mount, using statx's
// STATX_ATTR_MOUNT_ROOT (Linux 5.8+), falling back to /proc/self/mountinfo.
// path itself is not followed if it is a symlink.
func (*SystemMounter) IsMountPoint(path string) (bool, error) {
	var stx unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_TYPE, &stx)
	if err != nil {
		return false, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return false, err
	}
	points, err := MountPointsUnder("/")
	if err != nil {
		return false, err
	}
	for _, p := range points {
		if p == abs {
			return true, nil
		}
	}
	return false, nil
}

// MountPointsUnder lists the mount points in /proc/self/mountinfo equal to or
// below dir (cleaned, absolute), in mountinfo order.
func MountPointsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || dir == "/" || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return out, nil
}

// unescapeMountinfo decodes the \ooo octal escapes mountinfo uses for space,
// tab, newline and backslash.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountIfMounted unmounts path when it is a mount point; a missing path is
// not an error.
func unmountIfMounted(m Mounter, path string) error {
	if m == nil {
		return nil
	}
	mounted, err := m.IsMountPoint(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !mounted {
		return nil
	}
	return m.Unmount(path)
}

func isRoot() bool { return os.Geteuid() == 0 }
