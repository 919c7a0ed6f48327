//go:build linux

package fsutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func stampFile(t *testing.T, path string) Stamp {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return StampOf(fi)
}

func TestStamp(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	if err := os.WriteFile(a, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	first := stampFile(t, a)
	if stampFile(t, a) != first {
		t.Fatal("an unchanged file's stamp moved")
	}
	if first.Trusted(first.LastChange().Add(time.Millisecond), 100*time.Millisecond) {
		t.Fatal("a stamp taken within the window is trusted")
	}
	if !first.Trusted(first.LastChange().Add(100*time.Millisecond), 100*time.Millisecond) {
		t.Fatal("a stamp taken after the window is not trusted")
	}
	// Replaced by rename with the same size: a new inode.
	tmp := filepath.Join(dir, ".a")
	if err := os.WriteFile(tmp, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, a); err != nil {
		t.Fatal(err)
	}
	if stampFile(t, a) == first {
		t.Fatal("a file replaced by rename kept its stamp")
	}
	if (Stamp{}).Trusted(time.Now(), 0) {
		t.Fatal("a stamp without an inode is trusted")
	}
}
