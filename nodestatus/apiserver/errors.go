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
	ErrInvalidConfig = errors.New("nodestatus/apiserver: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrLeaseUpdate: every try to renew the lease failed.
	ErrLeaseUpdate = errors.New("nodestatus/apiserver: lease update failed")
	// ErrWrongNode: the sink was handed a node of another name.
	ErrWrongNode = errors.New("nodestatus/apiserver: node name does not match")
)
