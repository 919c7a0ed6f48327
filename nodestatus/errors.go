package nodestatus

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("nodestatus: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrMachineInfo: the machine's description (cores, memory, IDs) could
	// not be read.
	ErrMachineInfo = errors.New("nodestatus: machine info unavailable")
	// ErrNoAddress: no node address could be found.
	ErrNoAddress = errors.New("nodestatus: no node address")
	// ErrSetter: one or more setters failed; the node was still reported with
	// what the others set. The wrapping error joins the setters' errors.
	ErrSetter = errors.New("nodestatus: setter failed")
	// ErrRegister: the node could not be registered with the sink.
	ErrRegister = errors.New("nodestatus: register failed")
	// ErrUpdateRetries: every try of a status update failed.
	ErrUpdateRetries = errors.New("nodestatus: update node status exceeds retry count")
	// ErrNotRegistered: a status update was attempted before registration.
	ErrNotRegistered = errors.New("nodestatus: node not registered")
)
