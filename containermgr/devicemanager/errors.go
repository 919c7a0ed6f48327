package devicemanager

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrAlreadyRan: Run was called before on this value; it is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrInvalidConfig is returned by New for a bad Config; the message
	// names the field.
	ErrInvalidConfig = errors.New("devicemanager: invalid config")
	// ErrNotStarted is returned by the methods that need the state before
	// Start has loaded it.
	ErrNotStarted = errors.New("devicemanager: not started")
	// ErrNotRunning is returned by the calls that need Run's context (a
	// registration, a plugin call) while Run is not running.
	ErrNotRunning = errors.New("devicemanager: not running")
	// ErrUnsupportedVersion: a plugin registered with an API version other
	// than v1beta1.
	ErrUnsupportedVersion = errors.New("devicemanager: unsupported device plugin API version")
	// ErrInvalidRegistration: a registration names a bad resource or
	// endpoint.
	ErrInvalidRegistration = errors.New("devicemanager: invalid registration")
	// ErrAllocation wraps every reason a container's devices could not be
	// allocated (too few healthy and free devices, a plugin error).
	ErrAllocation = errors.New("devicemanager: allocation failed")
	// ErrCorruptState: the checkpoint decodes but its content is wrong.
	// Start sets such a file aside and starts with no allocations.
	ErrCorruptState = errors.New("devicemanager: corrupt state")
)
