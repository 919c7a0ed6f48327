package logs

import "errors"

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidConfig: a Config or ReaderConfig field is bad (the error
	// names it).
	ErrInvalidConfig = errors.New("logs: invalid config")
	// ErrInvalidOptions: log read options are bad (negative tailLines,
	// limitBytes below 1, both sinceSeconds and sinceTime, an unknown
	// stream, tailLines with one stream). A server answers 400.
	ErrInvalidOptions = errors.New("logs: invalid log options")
	// ErrBadRecord: a line is not in the CRI log format
	// "<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <message>". The reader
	// skips such lines; ParseRecord returns it.
	ErrBadRecord = errors.New("logs: bad CRI log record")
	// ErrReopenUnimplemented: the runtime answered ReopenContainerLog with
	// codes.Unimplemented. The rename was undone and rotation is off for
	// the rest of the Manager's life (Disabled reports it).
	ErrReopenUnimplemented = errors.New("logs: runtime cannot reopen container logs")
)
