package checkpoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

func Example() {
	dir, err := os.MkdirTemp("", "checkpoint-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	if err := checkpoint.Write(dir, "state", []byte(`{"policy":"static"}`)); err != nil {
		panic(err)
	}
	data, err := checkpoint.Read(dir, "state")
	fmt.Printf("%s %v\n", data, err)

	// Damage the file: Read notices and the caller sets it aside.
	if err := os.WriteFile(filepath.Join(dir, "state"), []byte("garbage"), 0o600); err != nil {
		panic(err)
	}
	_, err = checkpoint.Read(dir, "state")
	fmt.Println(errors.Is(err, checkpoint.ErrCorrupt))
	moved, err := checkpoint.SetAside(dir, "state")
	fmt.Println(filepath.Base(moved), err)
	// Output:
	// {"policy":"static"} <nil>
	// true
	// state.corrupt <nil>
}
