package systemd

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("nodeshutdown/systemd: invalid config")
	// ErrBus: the system bus, logind or systemd could not be reached or
	// answered wrongly.
	ErrBus = errors.New("nodeshutdown/systemd: D-Bus")
	// ErrInhibitDelay: logind's InhibitDelayMaxSec is below the shutdown's
	// period and could not be raised.
	ErrInhibitDelay = errors.New("nodeshutdown/systemd: InhibitDelayMaxSec too small")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)
