package podconfig

import (
	"io/fs"
	"time"
)

// fileStamp is what a manifest's metadata says of its content: equal stamps
// taken at two scans mean the file was not written, replaced or retargeted
// in between (given the stamp was trusted when taken; see racyWindow).
type fileStamp struct {
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
}

// trusted reports whether the file's last change (mtime and ctime) is at
// least racyWindow before now, so that a later change must show in its
// times. A stamp without an inode (a platform whose FileInfo has none) is
// never trusted.
func (s fileStamp) trusted(now time.Time) bool {
	if s.ino == 0 {
		return false
	}
	last := max(s.mtime, s.ctime)
	return now.UnixNano()-last >= int64(racyWindow)
}

// stampOf returns the stamp of fi (from os.Stat, symlinks followed).
func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	sysStamp(fi, &st)
	return st
}
