package yamljson

import "errors"

var (
	// ErrUnsupported is wrapped by Convert's error for YAML it leaves to a
	// full decoder (tags, merge keys, complex or duplicate keys).
	ErrUnsupported = errors.New("yamljson: not converted in a stream")
	// ErrTooLarge is the default sentinel of Limits.TooLarge.
	ErrTooLarge = errors.New("yamljson: too large")
	// ErrTooDeep is the default sentinel of Limits.TooDeep.
	ErrTooDeep = errors.New("yamljson: too deep")
)
