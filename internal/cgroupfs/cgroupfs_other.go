//go:build !linux

package cgroupfs

import (
	"errors"
	"fmt"
)

// errNoDevice never matches off Linux.
var errNoDevice = errors.New("cgroupfs: no device")

// Statfs is only implemented on Linux.
func Statfs(path string) (FsStats, error) {
	return FsStats{}, fmt.Errorf("statfs %s: %w", path, errors.ErrUnsupported)
}
