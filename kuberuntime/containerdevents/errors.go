package containerdevents

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("containerdevents: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrUnsupported: the endpoint does not serve containerd's event service
	// (it answered Unimplemented: not containerd, e.g. CRI-O). Run returns it.
	ErrUnsupported = errors.New("containerdevents: the endpoint has no containerd event service")
	// ErrMalformed: an envelope or event could not be decoded. Run logs and
	// skips such messages; the decode functions return it.
	ErrMalformed = errors.New("containerdevents: malformed message")
)
