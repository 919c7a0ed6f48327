//go:build linux

package fsutil

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestReadAtMost(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), 1000) // 10,000 bytes: several reads
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 4096, 9999, 10000, 10001, 1 << 20} {
		got, err := ReadAtMost(p, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := data[:min(n, len(data))]; !bytes.Equal(got, want) {
			t.Fatalf("n=%d: %d bytes, want %d", n, len(got), len(want))
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadAtMost(empty, 10); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q, %v", got, err)
	}
	_, err := ReadAtMost(filepath.Join(dir, "missing"), 10)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "missing") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := ReadAtMost(dir, 10); err == nil {
		t.Fatal("reading a directory gave no error")
	}
}

func TestCreateExclusive(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "f")
	if err := CreateExclusive(p, 0o666); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Fatalf("made %v, %v; want an empty 0666 file despite the umask", fi, err)
	}
	if err := CreateExclusive(p, 0o666); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	if err := CreateExclusive(filepath.Join(t.TempDir(), "no", "f"), 0o666); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v, want ErrNotExist", err)
	}
}
