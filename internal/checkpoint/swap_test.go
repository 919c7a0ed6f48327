package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// swapFS answers Lstat for the file that is there, then swaps the name
// for what swap puts there: the window between a check by name and an
// open by name, made deterministic.
type swapFS struct {
	OS
	swap func(path string)
}

func (f swapFS) Lstat(p string) (fs.FileInfo, error) {
	fi, err := f.OS.Lstat(p)
	if err == nil && f.swap != nil {
		f.swap(p)
	}
	return fi, err
}

// A checkpoint name swapped for a symlink, or for an oversized file, after
// it was checked is not read through (issue 23, item 5): the file is
// opened once with O_NOFOLLOW and checked on the descriptor.
func TestReadSwappedName(t *testing.T) {
	outside := t.TempDir()
	if err := Write(outside, "secret", []byte("from outside the directory")); err != nil {
		t.Fatal(err)
	}
	for name, swap := range map[string]func(t *testing.T, p string){
		"symlink": func(t *testing.T, p string) {
			tmp := p + ".swap"
			if err := os.Symlink(filepath.Join(outside, "secret"), tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
		},
		"oversized": func(t *testing.T, p string) {
			if err := os.Truncate(p, MaxSize+headerLen+1); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := Write(dir, "state", []byte("inside")); err != nil {
				t.Fatal(err)
			}
			fsys := swapFS{swap: func(p string) { swap(t, p) }}
			got, err := ReadFS(fsys, dir, "state")
			if err == nil {
				t.Fatalf("read %q through a swapped name, want an error", got)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrCorrupt or ErrTooLarge", err)
			}
		})
	}
}

// A FIFO in place of the file fails at once rather than blocking the open.
func TestReadFIFODoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	if err := mkfifo(filepath.Join(dir, "state")); err != nil {
		t.Skip("no mkfifo:", err)
	}
	if _, err := (OS{}).ReadFile(filepath.Join(dir, "state")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}
func mkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }

// ReadFileMax refuses a file over its limit from the size on the
// descriptor, naming the file, its size and the limit; a file of exactly
// the limit is read; and a file whose size says less than it holds (a
// procfs file says 0) is cut at limit+1 bytes and refused.
func TestReadFileMax(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "plain")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := (OS{}).ReadFileMax(p, 10); err != nil || string(b) != "0123456789" {
		t.Errorf("ReadFileMax(10) of 10 bytes = %q, %v; want the bytes", b, err)
	}
	_, err := (OS{}).ReadFileMax(p, 9)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "plain has 10 bytes, limit 9") {
		t.Errorf("ReadFileMax(9) of 10 bytes: %v, want ErrTooLarge naming the file, size and limit", err)
	}
	_, err = (OS{}).ReadFileMax("/proc/self/status", 16)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "status grew beyond 16 bytes") {
		t.Errorf("ReadFileMax(16) of /proc/self/status: %v, want ErrTooLarge for a file that holds more than its size", err)
	}
}
