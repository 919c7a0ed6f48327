package pleg

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config or EventedConfig field is invalid; the
	// wrapping error names the field.
	ErrInvalidConfig = errors.New("pleg: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrRelist: the runtime could not list pods (or a pod) for a relist; the
	// wrapping error carries the runtime's error.
	ErrRelist = errors.New("pleg: relist failed")
	// ErrNotHealthy: Healthy found the generator unhealthy; the wrapping
	// error says why.
	ErrNotHealthy = errors.New("pleg: not healthy")
)
