//go:build !linux

package eviction

import (
	"errors"
	"fmt"
)

// errNoDevice never matches off Linux.
var errNoDevice = errors.New("eviction: no device")

// statfs is only implemented on Linux.
func statfs(path string) (*FsStats, error) {
	return nil, fmt.Errorf("statfs %s: %w", path, errors.ErrUnsupported)
}
