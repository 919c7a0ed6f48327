package apiserver

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("apiserver: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrNodeWatched: a Shared watch already runs a source of that node.
	ErrNodeWatched = errors.New("apiserver: node's pods already watched")
)
