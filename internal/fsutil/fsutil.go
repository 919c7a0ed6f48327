package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// MkdirAll is os.MkdirAll tuned for the common case of a new directory
// whose parent exists: one mkdir system call where os.MkdirAll makes three
// (stat, stat of the parent, mkdir). A missing parent falls back to
// os.MkdirAll; an existing directory is fine; an existing non-directory is
// an error, as with os.MkdirAll.
func MkdirAll(dir string, mode fs.FileMode) error {
	err := os.Mkdir(dir, mode)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, mode)
	case errors.Is(err, fs.ErrExist):
		fi, serr := os.Stat(dir)
		if serr != nil {
			return serr
		}
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: fmt.Errorf("%w: not a directory", fs.ErrExist)}
		}
		return nil
	}
	return err
}
