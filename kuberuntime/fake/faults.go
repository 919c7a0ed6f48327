package fake

import (
	"context"
	"time"
)

// Call is one recorded CRI call.
type Call struct {
	// Method is the CRI method name, e.g. "StartContainer".
	Method string
	// ID is the container, sandbox or image id the call names (for
	// CreateContainer: the sandbox id); empty when it names none.
	ID string
	// Name is the metadata name for RunPodSandbox and CreateContainer, the
	// image for image calls, the joined command for ExecSync.
	Name string
	// Timeout is StopContainer's timeout in seconds or ExecSync's in ns.
	Timeout int64
}

type fault struct {
	err   error
	times int // <0: until cleared
	delay time.Duration
}

// InjectError makes the next times calls of method (a CRI method name such
// as "StartContainer") fail with err; times < 0 means until ClearFaults. A
// delay injected for the same method still applies before the error.
func (r *Runtime) InjectError(method string, err error, times int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.faults[method]
	if f == nil {
		f = &fault{}
		r.faults[method] = f
	}
	f.err, f.times = err, times
	if err == nil || times == 0 {
		f.err, f.times = nil, 0
	}
}

// InjectDelay makes every call of method wait d on the injected clock
// before doing anything (until ClearFaults; d <= 0 removes the delay). The
// wait ends early, with the context's error, when the call's ctx ends, so a
// huge d is a hang only ctx ends.
func (r *Runtime) InjectDelay(method string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.faults[method]
	if f == nil {
		f = &fault{}
		r.faults[method] = f
	}
	f.delay = max(d, 0)
}

// ClearFaults removes every injected error and delay.
func (r *Runtime) ClearFaults() {
	r.mu.Lock()
	clear(r.faults)
	r.mu.Unlock()
}

// Calls returns a copy of the recorded calls, oldest first.
func (r *Runtime) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// ResetCalls forgets the recorded calls and counts.
func (r *Runtime) ResetCalls() {
	r.mu.Lock()
	r.calls = r.calls[:0]
	clear(r.counts)
	r.mu.Unlock()
}

// CountCalls is how many times method was called since New or ResetCalls.
func (r *Runtime) CountCalls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[method]
}

// CallsReceived is how many calls of any method the runtime received since
// New or ResetCalls: a test driving a call over a transport can wait for
// it to arrive before it moves the clock.
func (r *Runtime) CallsReceived() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c
	}
	return n
}

// begin records a call, then applies the method's injected delay and error.
// It fails at once when ctx is already done, as a remote call would.
func (r *Runtime) begin(ctx context.Context, method, id, name string, timeout int64) error {
	if ctx.Err() != nil {
		return ctxErr(ctx)
	}
	r.mu.Lock()
	if len(r.calls) >= r.maxCalls {
		n := copy(r.calls, r.calls[len(r.calls)/2:])
		r.calls = r.calls[:n]
	}
	r.calls = append(r.calls, Call{Method: method, ID: id, Name: name, Timeout: timeout})
	r.counts[method]++
	var (
		delay time.Duration
		err   error
	)
	if f := r.faults[method]; f != nil {
		delay = f.delay
		if f.err != nil {
			err = f.err
			if f.times > 0 {
				f.times--
				if f.times == 0 {
					f.err = nil
				}
			}
		}
	}
	r.mu.Unlock()
	if delay > 0 {
		if werr := r.wait(ctx, delay); werr != nil {
			return werr
		}
	}
	return err
}

// waitUntil blocks until the injected clock reaches at (ns since the epoch),
// wake has a value, or ctx ends. A fake clock's timer with a duration <= 0
// only fires on the next Step, so a deadline already passed returns at once.
func (r *Runtime) waitUntil(ctx context.Context, at int64, wake <-chan struct{}) error {
	now := r.nowNano()
	if at <= now {
		return nil
	}
	t := r.clock.NewTimer(time.Duration(at - now))
	defer t.Stop()
	if r.nowNano() >= at { // the clock moved past it while the timer was set
		return nil
	}
	select {
	case <-t.C():
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}

// wait blocks for d on the injected clock or until ctx ends.
func (r *Runtime) wait(ctx context.Context, d time.Duration) error {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	}
}
