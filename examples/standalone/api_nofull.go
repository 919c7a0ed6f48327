//go:build !nodeapi

package main

import (
	"errors"

	"github.com/nodekit/nodekit"
)

// wireAPI refuses: this binary was built without the API.
func (f *apiFlags) wireAPI(*nodekit.Builder, string, string) error {
	return errors.New("--port: this binary has no node API; build it with `go build -tags nodeapi ./examples/standalone`")
}
