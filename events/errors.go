package events

import "errors"

// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
var ErrInvalidConfig = errors.New("events: invalid config")
