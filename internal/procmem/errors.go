package procmem

import "errors"

var (
	// ErrNoRSS: the status has no VmRSS line (a kernel thread or a
	// zombie has no memory of its own).
	ErrNoRSS = errors.New("procmem: no VmRSS in the status")
	// ErrBadField: a field the package reads does not hold a number (of
	// kB for the memory fields).
	ErrBadField = errors.New("procmem: malformed status field")
)
