//go:build linux

package fsutil

import (
	"io/fs"
	"slices"
	"syscall"
)

// ReadAtMost returns the first n bytes of the file name (all of it when it
// is shorter). It reads with plain system calls: os.Open readies every
// file for the poller, which for a regular file on Linux is four fcntl
// calls and a failed epoll_ctl on top of open, read and close, and on
// some virtual machines each system call costs more than the read.
// Errors are *fs.PathError, as os's.
func ReadAtMost(name string, n int) ([]byte, error) {
	fd, err := open(name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, min(n, 4096))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf), n-len(buf)))
		}
		m, err := syscall.Read(fd, buf[len(buf):min(cap(buf), n)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		if m == 0 {
			break
		}
		buf = buf[:len(buf)+m]
	}
	return buf, nil
}

// CreateExclusive makes the empty file name with exactly mode (the umask
// does not narrow it); it fails if name exists. Like ReadAtMost, it costs
// three system calls where os.OpenFile and os.Chmod take eight.
func CreateExclusive(name string, mode fs.FileMode) error {
	fd, err := open(name, syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return &fs.PathError{Op: "open", Path: name, Err: err}
	}
	err = syscall.Fchmod(fd, uint32(mode.Perm()))
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "chmod", Path: name, Err: err}
	}
	return nil
}

func open(name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := syscall.Open(name, flags, mode)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// EnsureDir makes dir (its parent must exist) or accepts it when it
// exists, without following a symlink at dir: it opens dir once with
// O_NOFOLLOW|O_DIRECTORY and checks the descriptor, so a symlink or a
// non-directory is an error wrapping ErrNotPlainDir. With chmod set, the
// mode is set to exactly mode through the descriptor (never through a
// path a swapped link could redirect).
func EnsureDir(dir string, mode fs.FileMode, chmod bool) error {
	if err := syscall.Mkdir(dir, uint32(mode.Perm())); err != nil && err != syscall.EEXIST {
		return &fs.PathError{Op: "mkdir", Path: dir, Err: err}
	}
	fd, err := open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err == syscall.ELOOP || err == syscall.ENOTDIR {
		return &fs.PathError{Op: "open", Path: dir, Err: ErrNotPlainDir}
	}
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return &fs.PathError{Op: "fstat", Path: dir, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return &fs.PathError{Op: "open", Path: dir, Err: ErrNotPlainDir}
	}
	if chmod && fs.FileMode(st.Mode).Perm() != mode.Perm() {
		if err := syscall.Fchmod(fd, uint32(mode.Perm())); err != nil {
			return &fs.PathError{Op: "chmod", Path: dir, Err: err}
		}
	}
	return nil
}
