// Package fsutil holds small file system helpers shared by nodekit's
// packages, each cheaper in system calls than its os equivalent:
//
//	err := fsutil.MkdirAll(dir, 0o750)          // os.MkdirAll, one mkdir when the parent exists
//	data, err := fsutil.ReadAtMost(path, limit) // a bounded read of a whole file
//	u, _, err := fsutil.DiskUsage(ctx, dir, nil) // allocated bytes and inodes of a tree, as du
//	err = fsutil.CreateExclusive(path, 0o600)   // a new empty file with exactly that mode
//	st := fsutil.StampOf(fi)                    // size, times, inode and device of a file
//	ok := st.Trusted(now, window)               // changed long enough ago to vouch for its content
package fsutil
