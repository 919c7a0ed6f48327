package prober

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors of the package, wrapped with %w.
var (
	// ErrInvalidConfig: a Config field is missing or out of range.
	ErrInvalidConfig = errors.New("prober: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrBadProbe: the probe cannot be run as declared (no handler, a named
	// port the container does not declare, a port out of range).
	ErrBadProbe = errors.New("prober: bad probe")
	// ErrNoExec: an exec probe was declared but Config.Exec is nil.
	ErrNoExec = errors.New("prober: no exec runner")
)
