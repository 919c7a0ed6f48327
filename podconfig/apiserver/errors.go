package apiserver

import "errors"

var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("apiserver: invalid config")
	// ErrAlreadyRunning: Run was called while another Run is active.
	ErrAlreadyRunning = errors.New("apiserver: already running")
)
