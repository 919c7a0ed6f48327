package fsutil

import (
	"io/fs"
	"time"
)

// Stamp is what a file's metadata says of its content: equal stamps taken
// at two times mean the file was not written, replaced or retargeted in
// between, given the first was trusted when taken (Trusted).
type Stamp struct {
	size         int64
	mtime, ctime int64 // nanoseconds since the epoch
	ino, dev     uint64
}

// StampOf returns the stamp of fi (from os.Stat: symlinks followed).
func StampOf(fi fs.FileInfo) Stamp {
	st := Stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	sysStamp(fi, &st)
	return st
}

// Trusted reports whether the file's last change (mtime and ctime) is at
// least window before now, so that a later change must show in its times:
// file times come from a coarse kernel clock, and a file rewritten with the
// same size just after it was read can keep the same times (git's "racily
// clean" entries). A stamp without an inode (a platform whose FileInfo has
// none) is never trusted.
func (s Stamp) Trusted(now time.Time, window time.Duration) bool {
	if s.ino == 0 {
		return false
	}
	return now.Sub(s.LastChange()) >= window
}

// LastChange is the later of the file's modification and change times
// (the change time is zero where the platform gives none).
func (s Stamp) LastChange() time.Time { return time.Unix(0, max(s.mtime, s.ctime)) }
