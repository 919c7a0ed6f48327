package lifecycle

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with
// %w; match them with errors.Is.
var (
	// ErrAlreadyRan: Run was called before on this value, concurrently or
	// after it returned. Each value runs at most once.
	ErrAlreadyRan = errors.New("lifecycle: Run already called")
	// ErrStoppedEarly: a child's Run returned before its parent's ctx ended;
	// the wrapping error names the child and wraps its error, if any.
	ErrStoppedEarly = errors.New("lifecycle: stopped early")
)
