package fsutil

import (
	"io/fs"
	"syscall"
)

// sysStamp adds the inode, device and change time of fi.
func sysStamp(fi fs.FileInfo, st *Stamp) {
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino, st.dev = sys.Ino, uint64(sys.Dev)                 //nolint:unconvert // Dev is uint32 on some architectures
		st.ctime = int64(sys.Ctim.Sec)*1e9 + int64(sys.Ctim.Nsec) //nolint:unconvert // int32 on 32-bit architectures
	}
}
