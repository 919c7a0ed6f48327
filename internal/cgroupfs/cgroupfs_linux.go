package cgroupfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// errNoDevice is what reading a file of a removed cgroup returns.
const errNoDevice = unix.ENODEV

// Statfs measures the file system holding path.
func Statfs(path string) (FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FsStats{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bsize := uint64(st.Bsize)
	return FsStats{
		Available:  st.Bavail * bsize,
		Capacity:   st.Blocks * bsize,
		Free:       st.Bfree * bsize,
		Inodes:     st.Files,
		InodesFree: st.Ffree,
	}, nil
}
