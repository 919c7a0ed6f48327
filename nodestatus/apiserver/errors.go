package apiserver

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("nodestatus/apiserver: invalid config")
	// ErrAlreadyRunning: Run was called while a Run is in progress.
	ErrAlreadyRunning = errors.New("nodestatus/apiserver: already running")
	// ErrLeaseUpdate: every try to renew the lease failed.
	ErrLeaseUpdate = errors.New("nodestatus/apiserver: lease update failed")
	// ErrWrongNode: the sink was handed a node of another name.
	ErrWrongNode = errors.New("nodestatus/apiserver: node name does not match")
)

// Errors of the pod side (PodStatusSink, MirrorClient).
var (
	// ErrInvalidPod: a nil pod, or one without the fields needed.
	ErrInvalidPod = errors.New("nodestatus/apiserver: invalid pod")
	// ErrNoMirrorPod: a static pod has no current mirror pod to report its
	// status on yet.
	ErrNoMirrorPod = errors.New("nodestatus/apiserver: static pod has no mirror pod")
)
