package nodekit

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with %w
// (besides the errors of the parts, which Build and Run wrap with the part's
// name); match them with errors.Is.
var (
	// ErrInvalidConfig: the Builder was given a bad or conflicting setting,
	// or a part refused its configuration. The wrapping error names the part
	// and the field.
	ErrInvalidConfig = errors.New("nodekit: invalid config")
	// ErrAlreadyRunning: Agent.Run was called a second time.
	ErrAlreadyRunning = errors.New("nodekit: agent already ran")
	// ErrPartStopped: a part's Run returned while the agent still ran (with
	// nil, or with an error of its own, which is wrapped as well).
	ErrPartStopped = errors.New("nodekit: part stopped")
	// ErrConnect: the container runtime could not be reached at start.
	ErrConnect = errors.New("nodekit: runtime connect failed")
)
