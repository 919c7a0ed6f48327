//go:build linux

package podconfig

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodekit/nodekit/internal/fsutil"
)

func (h *fileHarness) scan(t *testing.T, full bool) int {
	t.Helper()
	h.src.mu.Lock()
	before := h.src.reads
	h.src.mu.Unlock()
	if err := h.src.sync(h.ctx, full, false); err != nil {
		t.Fatal(err)
	}
	h.src.mu.Lock()
	defer h.src.mu.Unlock()
	return h.src.reads - before
}

// lastChange is the later of the file's mtime and ctime.
func lastChange(t *testing.T, path string) time.Time {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fsutil.StampOf(fi).LastChange()
}

// A scan for file system events reads only the files whose metadata moved
// since their last read; a full scan (Sync, every Period) reads them all.
func TestFileSourceEventScanSkipsUnchangedFiles(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, a, manifest("a"))
	write(t, b, manifest("b"))
	h := newFileHarness(t, dir)
	h.clk.SetTime(lastChange(t, b).Add(time.Second)) // both well past racyWindow
	if n := h.scan(t, false); n != 2 {
		t.Fatalf("first scan read %d files, want 2", n)
	}
	if us := h.pending(); len(us) != 1 || names(us[0]) != "a-node,b-node" {
		t.Fatalf("first scan sent %+v", us)
	}
	if n := h.scan(t, false); n != 0 {
		t.Fatalf("an event scan read %d unchanged files", n)
	}
	if n := h.scan(t, true); n != 2 {
		t.Fatalf("a full scan read %d files, want 2", n)
	}

	// b replaced by rename (a new inode, as editors and kubectl-style
	// writers do), a grown: both read again; a new file c read.
	tmp := filepath.Join(dir, ".b.tmp")
	write(t, tmp, manifest("bb"))
	if err := os.Rename(tmp, b); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(a, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# more\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	write(t, filepath.Join(dir, "c.yaml"), manifest("c"))
	h.clk.SetTime(time.Now().Add(time.Second))
	if n := h.scan(t, false); n != 3 {
		t.Fatalf("event scan after changes read %d files, want 3", n)
	}
	if us := h.pending(); len(us) != 1 || names(us[0]) != "a-node,bb-node,c-node" {
		t.Fatalf("after changes sent %+v", us)
	}

	// A removed file still goes without being read.
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if n := h.scan(t, false); n != 0 {
		t.Fatalf("removal: read %d files", n)
	}
	if us := h.pending(); len(us) != 1 || names(us[0]) != "bb-node,c-node" {
		t.Fatalf("after removal sent %+v", us)
	}
}

// A file read within racyWindow of its last change is read again by the
// next scan: a rewrite in the same tick of the kernel's clock may leave its
// size and times as they were.
func TestFileSourceRacyFileReadAgain(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, manifest("a"))
	h := newFileHarness(t, dir)
	h.clk.SetTime(lastChange(t, a)) // read in the same instant it changed
	if n := h.scan(t, false); n != 1 {
		t.Fatalf("first scan read %d", n)
	}
	if n := h.scan(t, false); n != 1 {
		t.Fatalf("a file read within racyWindow of its change was not read again (%d reads)", n)
	}
	// Read once it is old enough, then trusted.
	h.clk.SetTime(lastChange(t, a).Add(racyWindow))
	if n := h.scan(t, false); n != 1 {
		t.Fatalf("third scan read %d", n)
	}
	if n := h.scan(t, false); n != 0 {
		t.Fatalf("a trusted, unchanged file was read again (%d reads)", n)
	}
}

// A single-file Path is stamped too.
func TestFileSourceSingleFileStamp(t *testing.T) {
	a := filepath.Join(t.TempDir(), "a.yaml")
	write(t, a, manifest("a"))
	h := newFileHarness(t, a)
	h.clk.SetTime(lastChange(t, a).Add(time.Second))
	if n := h.scan(t, false); n != 1 {
		t.Fatalf("first scan read %d", n)
	}
	if n := h.scan(t, false); n != 0 {
		t.Fatalf("unchanged single file read again (%d)", n)
	}
	write(t, a, manifest("a")+"# grown\n")
	h.clk.SetTime(time.Now().Add(time.Second))
	if n := h.scan(t, false); n != 1 {
		t.Fatalf("changed single file read %d times", n)
	}
}
