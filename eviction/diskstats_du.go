package eviction

import (
	"context"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// duDir measures the directory at path and each entry directly in it (see
// fsutil.DiskUsage, shared with the stats package).
func duDir(ctx context.Context, path string, child func(name string, isDir bool, u diskUsage)) (diskUsage, bool, error) {
	var each func(string, bool, fsutil.Usage)
	if child != nil {
		each = func(name string, isDir bool, u fsutil.Usage) { child(name, isDir, diskUsage(u)) }
	}
	total, truncated, err := fsutil.DiskUsage(ctx, path, each)
	return diskUsage(total), truncated, err
}

// The walk's bounds, for the tests.
const (
	duMaxDepth   = fsutil.DiskUsageMaxDepth
	duCheckEvery = fsutil.DiskUsageCheckEvery
)
