package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAll(t *testing.T) {
	root := t.TempDir()
	cases := []struct {
		name string
		path string
	}{
		{"parent exists", filepath.Join(root, "a")},
		{"parents missing", filepath.Join(root, "b", "c", "d")},
		{"already there", filepath.Join(root, "a")},
	}
	for _, tc := range cases {
		if err := MkdirAll(tc.path, 0o750); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		fi, err := os.Stat(tc.path)
		if err != nil || !fi.IsDir() {
			t.Fatalf("%s: %s is not a directory: %v", tc.name, tc.path, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(root, "a")); fi.Mode().Perm()&^0o750 != 0 {
		t.Fatalf("mode %v, want at most 0750", fi.Mode().Perm())
	}

	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(file, 0o750); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("a file in the way: %v, want an error wrapping fs.ErrExist", err)
	}
	if err := MkdirAll(filepath.Join(file, "sub"), 0o750); err == nil {
		t.Fatal("a file as parent: no error")
	}
}
