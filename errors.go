package nodekit

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w
// (besides the errors of the parts, which Build and Run wrap with the part's
// name); match them with errors.Is.
var (
	// ErrInvalidConfig: the Builder was given a bad or conflicting setting,
	// or a part refused its configuration. The wrapping error names the part
	// and the field.
	ErrInvalidConfig = errors.New("nodekit: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrPartStopped: a part's Run returned while the agent still ran (with
	// nil, or with an error of its own, which is wrapped as well, together
	// with lifecycle.ErrStoppedEarly).
	ErrPartStopped = errors.New("nodekit: part stopped")
	// ErrConnect: the container runtime could not be reached at start.
	ErrConnect = errors.New("nodekit: runtime connect failed")
	// ErrUnhealthy: Agent.Healthy found the agent not working as a node
	// should; the wrapped errors say why.
	ErrUnhealthy = errors.New("nodekit: agent unhealthy")
	// ErrPodTerminal: Agent.WaitForPod's pod reached a terminal phase
	// without meeting the condition.
	ErrPodTerminal = errors.New("nodekit: pod terminal")
)
