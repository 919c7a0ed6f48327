package pleg

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config or EventedConfig field is invalid; the
	// wrapping error names the field.
	ErrInvalidConfig = errors.New("pleg: invalid config")
	// ErrAlreadyRunning: Run was called while a Run is in progress.
	ErrAlreadyRunning = errors.New("pleg: already running")
	// ErrRelist: the runtime could not list pods (or a pod) for a relist; the
	// wrapping error carries the runtime's error.
	ErrRelist = errors.New("pleg: relist failed")
	// ErrNotHealthy: Healthy found the generator unhealthy; the wrapping
	// error says why.
	ErrNotHealthy = errors.New("pleg: not healthy")
)
