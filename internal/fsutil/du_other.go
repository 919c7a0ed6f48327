//go:build !linux

package fsutil

import (
	"context"
	"errors"
	"fmt"
)

// DiskUsage is only implemented on Linux.
func DiskUsage(_ context.Context, path string, _ func(string, bool, Usage)) (Usage, bool, error) {
	return Usage{}, false, fmt.Errorf("disk usage of %s: %w", path, errors.ErrUnsupported)
}
