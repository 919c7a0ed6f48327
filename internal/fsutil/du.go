package fsutil

// DiskUsageMaxDepth bounds how deep a DiskUsage walk descends (each
// level holds one open directory). Deeper directories are counted
// themselves but not entered, and the walk reports that it was cut short.
const DiskUsageMaxDepth = 64

// DiskUsageCheckEvery is how many entries a walk reads between checks of
// its context.
const DiskUsageCheckEvery = 256

// Usage is the disk space (allocated blocks, as du counts it) and inodes
// of a tree.
type Usage struct{ Bytes, Inodes uint64 }

func (u *Usage) add(v Usage) {
	u.Bytes += v.Bytes
	u.Inodes += v.Inodes
}
