package eviction

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidThreshold: a threshold, grace period or minimum reclaim
	// statement could not be parsed; the wrapping error names the signal.
	ErrInvalidThreshold = errors.New("eviction: invalid threshold")
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("eviction: invalid config")
	// ErrStats: the stats provider failed.
	ErrStats = errors.New("eviction: stats unavailable")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
