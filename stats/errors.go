package stats

import "errors"

// Sentinel errors. Errors returned by this package wrap one of these with
// %w; match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("stats: invalid config")
	// ErrStats: a source the summary cannot do without (the pod list, the
	// CRI container stats, the node's cgroups) failed; the wrapping error
	// says which.
	ErrStats = errors.New("stats: unavailable")
)
