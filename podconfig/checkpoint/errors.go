package checkpoint

import "errors"

var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("podconfig/checkpoint: invalid config")
	// ErrPersist: a pod set could not be written to disk. The update was
	// still forwarded.
	ErrPersist = errors.New("podconfig/checkpoint: cannot persist pods")
)
