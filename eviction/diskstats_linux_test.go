package eviction

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// blocks is what the file system allocated to path (not following a link).
func blocks(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Blocks) * 512
}

func writeFile(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDuDir: allocated blocks and inodes of every entry, the directory
// included; symbolic links are counted as themselves and never followed;
// a file with two links counts once; per-child totals.
func TestDuDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	outside := filepath.Join(root, "outside")
	writeFile(t, filepath.Join(outside, "big"), 1<<20)
	writeFile(t, filepath.Join(dir, "a", "f1"), 10000)
	writeFile(t, filepath.Join(dir, "a", "sub", "f2"), 5000)
	writeFile(t, filepath.Join(dir, "top"), 100)
	if err := os.Symlink(outside, filepath.Join(dir, "a", "link-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "big"), filepath.Join(dir, "link-file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a", "f1"), filepath.Join(dir, "a", "sub", "f1-again")); err != nil {
		t.Fatal(err)
	}

	children := map[string]diskUsage{}
	dirs := map[string]bool{}
	total, truncated, err := duDir(t.Context(), dir, func(name string, isDir bool, u diskUsage) {
		children[name] = u
		dirs[name] = isDir
	})
	if err != nil {
		t.Fatal(err)
	}
	if truncated {
		t.Error("truncated")
	}
	// d, a, f1, sub, f2, link-dir, top, link-file (f1-again is f1).
	if total.Inodes != 8 {
		t.Errorf("inodes = %d, want 8", total.Inodes)
	}
	var want uint64
	for _, p := range []string{"", "a", "a/f1", "a/sub", "a/sub/f2", "a/link-dir", "top", "link-file"} {
		want += blocks(t, filepath.Join(dir, p))
	}
	if total.Bytes != want {
		t.Errorf("bytes = %d, want %d", total.Bytes, want)
	}
	if total.Bytes >= 1<<20 {
		t.Errorf("bytes = %d: a symbolic link was followed", total.Bytes)
	}
	if a := children["a"]; a.Inodes != 5 || !dirs["a"] {
		t.Errorf("child a = %+v dir %v, want 5 inodes, a directory", a, dirs["a"])
	}
	if top := children["top"]; top.Inodes != 1 || dirs["top"] || top.Bytes != blocks(t, filepath.Join(dir, "top")) {
		t.Errorf("child top = %+v dir %v", top, dirs["top"])
	}
	if len(children) != 3 {
		t.Errorf("children = %v, want a, top, link-file", children)
	}

	// The root itself a symbolic link: not followed.
	if err := os.Symlink(dir, filepath.Join(root, "dlink")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := duDir(t.Context(), filepath.Join(root, "dlink"), nil); err == nil {
		t.Error("a symbolic link as the directory was followed")
	}
	if _, _, err := duDir(t.Context(), filepath.Join(root, "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v, want ErrNotExist", err)
	}
}

// TestDuDirDepth: a tree deeper than duMaxDepth is measured in part, not
// walked to the bottom, and says so.
func TestDuDirDepth(t *testing.T) {
	dir := t.TempDir()
	p := dir
	for range duMaxDepth + 10 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	total, truncated, err := duDir(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !truncated {
		t.Error("not truncated")
	}
	if total.Inodes != duMaxDepth+1 {
		t.Errorf("inodes = %d, want %d (the root and %d levels)", total.Inodes, duMaxDepth+1, duMaxDepth)
	}
}

// TestDuDirCanceled: a walk stops when its context ends.
func TestDuDirCanceled(t *testing.T) {
	dir := t.TempDir()
	for i := range 2 * duCheckEvery {
		writeFile(t, filepath.Join(dir, "s", strings.Repeat("f", 1+i%50)+string(rune('a'+i/50))), 0)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := duDir(ctx, dir, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// mountTmpfs mounts a tmpfs at dir, or skips the test without privileges.
func mountTmpfs(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v): needs root", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// TestDuDirSkipsMounts: a file system mounted below the directory is not
// counted (as a memory-backed emptyDir must not be).
func TestDuDirSkipsMounts(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "disk", "f"), 8192)
	mountTmpfs(t, filepath.Join(dir, "mem"))
	writeFile(t, filepath.Join(dir, "mem", "f"), 4<<20)
	children := map[string]diskUsage{}
	total, _, err := duDir(t.Context(), dir, func(name string, _ bool, u diskUsage) { children[name] = u })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := children["mem"]; ok || total.Inodes != 3 || total.Bytes >= 4<<20 {
		t.Errorf("total %+v children %v: the tmpfs was counted", total, children)
	}
}
