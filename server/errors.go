package server

import "errors"

var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
	ErrInvalidConfig = errors.New("server: invalid config")
	// ErrNotFound: the pod or container a request names is not on the node.
	ErrNotFound = errors.New("server: not found")
	// ErrBadRequest: a request's path or parameters are invalid.
	ErrBadRequest = errors.New("server: bad request")
	// ErrTooManyStreams: the cap on concurrent streams is reached.
	ErrTooManyStreams = errors.New("server: too many concurrent streams")
)
