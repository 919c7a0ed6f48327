package fsutil

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDiskUsageChildren(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a", "b", "f"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "g"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	children := map[string]Usage{}
	total, truncated, err := DiskUsage(t.Context(), dir, func(name string, isDir bool, u Usage) { children[name] = u })
	if err != nil || truncated {
		t.Fatalf("DiskUsage = %v, %v", truncated, err)
	}
	a := children["a"]
	if a.Inodes != 3 || a.Bytes < 64<<10 {
		t.Errorf("a = %+v, want 3 inodes and at least 64 KiB", a)
	}
	if total.Inodes != 5 || total.Bytes < a.Bytes+children["g"].Bytes {
		t.Errorf("total = %+v, children %+v", total, children)
	}
}
