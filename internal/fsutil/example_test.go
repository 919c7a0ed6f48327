package fsutil_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/fsutil"
)

func ExampleMkdirAll() {
	root, _ := os.MkdirTemp("", "fsutil")
	defer os.RemoveAll(root)
	dir := filepath.Join(root, "pods", "uid-1", "volumes")
	if err := fsutil.MkdirAll(dir, 0o750); err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := os.Stat(dir)
	fmt.Println(fi.IsDir())
	// Output: true
}
