package eviction

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// errNoDevice is what reading a file of a removed cgroup returns.
const errNoDevice = unix.ENODEV

// statfs measures the file system holding path.
func statfs(path string) (*FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return &FsStats{
		AvailableBytes: st.Bavail * bsize,
		CapacityBytes:  st.Blocks * bsize,
		InodesFree:     st.Ffree,
		Inodes:         st.Files,
	}, nil
}
