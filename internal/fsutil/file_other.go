//go:build !linux

package fsutil

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// ReadAtMost returns the first n bytes of the file name (all of it when it
// is shorter). Errors are *fs.PathError, as os's.
func ReadAtMost(name string, n int) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(n)))
}

// CreateExclusive makes the empty file name with exactly mode (the umask
// does not narrow it); it fails if name exists.
func CreateExclusive(name string, mode fs.FileMode) error {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode.Perm())
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Chmod(name, mode.Perm())
}

// EnsureDir makes dir or accepts it when it exists, refusing a symlink or
// a non-directory (ErrNotPlainDir); with chmod set, it sets mode. Off
// Linux the check and the chmod are by path.
func EnsureDir(dir string, mode fs.FileMode, chmod bool) error {
	if err := os.Mkdir(dir, mode.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &fs.PathError{Op: "open", Path: dir, Err: ErrNotPlainDir}
	}
	if chmod && fi.Mode().Perm() != mode.Perm() {
		return os.Chmod(dir, mode.Perm())
	}
	return nil
}
