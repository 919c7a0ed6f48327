package apiserver

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Errors of this package.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
	ErrInvalidConfig = errors.New("events/apiserver: invalid config")
	// ErrAlreadyRan: Run was called a second time (lifecycle.ErrAlreadyRan).
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
