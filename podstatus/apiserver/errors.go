package apiserver

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("podstatus/apiserver: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); the same value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrInvalidPod: a nil pod, or one without the fields needed.
	ErrInvalidPod = errors.New("podstatus/apiserver: invalid pod")
	// ErrNoMirrorPod: a static pod has no current mirror pod to report its
	// status on yet.
	ErrNoMirrorPod = errors.New("podstatus/apiserver: static pod has no mirror pod")
)
