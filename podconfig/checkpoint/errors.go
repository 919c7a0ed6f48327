package checkpoint

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("podconfig/checkpoint: invalid config")
	// ErrPersist: a pod set could not be written to disk. The update was
	// still forwarded.
	ErrPersist = errors.New("podconfig/checkpoint: cannot persist pods")
)
