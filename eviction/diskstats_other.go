//go:build !linux

package eviction

import (
	"context"
	"errors"
	"fmt"
)

// duDir is only implemented on Linux.
func duDir(_ context.Context, path string, _ func(string, bool, diskUsage)) (diskUsage, bool, error) {
	return diskUsage{}, false, fmt.Errorf("disk usage of %s: %w", path, errors.ErrUnsupported)
}
