package nodeshutdown

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("nodeshutdown: invalid config")
	// ErrShuttingDown is what ShutdownStatus returns while the node shuts
	// down. Its text is the kubelet's, which the node's Ready condition
	// shows as its message (reason KubeletNotReady).
	ErrShuttingDown = errors.New("node is shutting down")
	// ErrStateCorrupt: the state file (StateFileName) does not hold the
	// kubelet's JSON with sensible times; the wrapping error names the
	// file and what is wrong.
	ErrStateCorrupt = errors.New("nodeshutdown: corrupt state file")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
