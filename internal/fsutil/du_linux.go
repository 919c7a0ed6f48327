package fsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// inodeKey identifies a file with several hard links, counted once.
type inodeKey struct{ dev, ino uint64 }

// duWalker measures disk use under one directory: space as allocated
// blocks (what du reports, not file sizes), and inodes as the number of
// entries, the directory itself included. It never follows symbolic links
// (it opens every directory relative to its parent with O_NOFOLLOW, so a
// link swapped in during the walk is not followed either) and never
// crosses into another file system (a mount point below the directory,
// such as a tmpfs, is skipped with everything under it).
type duWalker struct {
	ctx       context.Context
	dev       uint64
	links     map[inodeKey]struct{}
	entries   int
	truncated bool // a directory deeper than DiskUsageMaxDepth was not entered
}

func statUsage(st *unix.Stat_t) Usage {
	return Usage{Bytes: uint64(st.Blocks) * 512, Inodes: 1}
}

// duOpen opens path as a directory without following a final symbolic
// link and returns it with its stat.
func duOpen(path string) (int, *unix.Stat_t, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return -1, nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	return fd, &st, nil
}

// DiskUsage measures the directory at path and, for each entry directly in it
// on the same file system, that entry's own total (a file, or a
// subdirectory with all below it), passed to child. A missing path is
// fs.ErrNotExist. truncated says a part was too deep to measure.
func DiskUsage(ctx context.Context, path string, child func(name string, isDir bool, u Usage)) (total Usage, truncated bool, err error) {
	fd, st, err := duOpen(path)
	if err != nil {
		return Usage{}, false, err
	}
	w := &duWalker{ctx: ctx, dev: uint64(st.Dev)}
	total = statUsage(st)
	u, err := w.walk(fd, 0, child)
	if err != nil {
		return Usage{}, false, fmt.Errorf("disk usage of %s: %w", path, err)
	}
	total.add(u)
	return total, w.truncated, nil
}

// walk measures what is below the open directory fd, which it closes.
func (w *duWalker) walk(fd int, depth int, child func(string, bool, Usage)) (Usage, error) {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	var sum Usage
	for {
		names, rerr := f.Readdirnames(512)
		for _, name := range names {
			if w.entries++; w.entries%DiskUsageCheckEvery == 0 {
				if err := w.ctx.Err(); err != nil {
					return Usage{}, err
				}
			}
			u, isDir, err := w.entry(fd, name, depth)
			if err != nil {
				return Usage{}, err
			}
			if child != nil && u.Inodes > 0 {
				child(name, isDir, u)
			}
			sum.add(u)
		}
		if rerr == io.EOF || (rerr == nil && len(names) == 0) {
			break
		}
		if rerr != nil {
			return Usage{}, rerr
		}
	}
	return sum, nil
}

// entry measures one entry of the directory fd: nothing for a mount point
// or a hard link already counted, the entry itself, and for a directory
// all below it.
func (w *duWalker) entry(fd int, name string, depth int) (u Usage, isDir bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return Usage{}, false, nil // removed while walking
		}
		return Usage{}, false, fmt.Errorf("stat %s: %w", name, err)
	}
	if uint64(st.Dev) != w.dev {
		return Usage{}, false, nil
	}
	isDir = st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && st.Nlink > 1 {
		k := inodeKey{uint64(st.Dev), st.Ino}
		if _, seen := w.links[k]; seen {
			return Usage{}, false, nil
		}
		if w.links == nil {
			w.links = map[inodeKey]struct{}{}
		}
		w.links[k] = struct{}{}
	}
	u = statUsage(&st)
	if !isDir {
		return u, false, nil
	}
	if depth+1 >= DiskUsageMaxDepth {
		w.truncated = true
		return u, true, nil
	}
	cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return u, true, nil // removed or replaced while walking
		}
		return Usage{}, false, fmt.Errorf("open %s: %w", name, err)
	}
	// Check the directory opened is the one measured (not a mount or a
	// directory swapped in since the stat).
	var cst unix.Stat_t
	if err := unix.Fstat(cfd, &cst); err != nil || cst.Dev != st.Dev || cst.Ino != st.Ino {
		_ = unix.Close(cfd)
		return u, true, nil
	}
	sub, err := w.walk(cfd, depth+1, nil)
	if err != nil {
		return Usage{}, false, fmt.Errorf("in %s: %w", name, err)
	}
	u.add(sub)
	return u, true, nil
}
