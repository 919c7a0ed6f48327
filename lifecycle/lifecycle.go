package lifecycle

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// Once guards a Run method so that it runs at most once. The zero value is
// ready to use; a Once must not be copied after first use. It is safe for
// concurrent use.
type Once struct {
	started atomic.Bool
}

// Start marks the value as started. The first call returns nil; every later
// call (concurrent or not) returns ErrAlreadyRan.
func (o *Once) Start() error {
	if !o.started.CompareAndSwap(false, true) {
		return ErrAlreadyRan
	}
	return nil
}

// Started reports whether Start was called.
func (o *Once) Started() bool { return o.started.Load() }

// errReturnedEarly stands for a child that returned nil before its ctx
// ended.
var errReturnedEarly = errors.New("returned early")

// StoppedEarly is the error a parent returns when its child named name
// returned from Run (with err, possibly nil) before the parent's ctx ended.
// It wraps ErrStoppedEarly and err, and its text names the child.
func StoppedEarly(name string, err error) error {
	if err == nil {
		err = errReturnedEarly
	}
	return fmt.Errorf("%w: %s: %w", ErrStoppedEarly, name, err)
}
