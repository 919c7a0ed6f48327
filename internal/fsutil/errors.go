package fsutil

import "errors"

// ErrNotPlainDir: a path that must be a directory of its own is a symbolic
// link or not a directory.
var ErrNotPlainDir = errors.New("fsutil: not a directory (or a symbolic link)")
