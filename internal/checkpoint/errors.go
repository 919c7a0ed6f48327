package checkpoint

import "errors"

var (
	// ErrCorrupt is returned by Read and Decode when the stored bytes are
	// truncated, carry a wrong header or fail their checksum.
	ErrCorrupt = errors.New("checkpoint: corrupt file")
	// ErrInvalidName is returned when a checkpoint name is not a single safe
	// path segment.
	ErrInvalidName = errors.New("checkpoint: invalid name")
	// ErrInvalidDir is returned when the directory argument is empty.
	ErrInvalidDir = errors.New("checkpoint: invalid directory")
	// ErrTooLarge is returned when data or a stored file exceeds MaxSize.
	ErrTooLarge = errors.New("checkpoint: too large")
)
