package events

import (
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// FakeConfig configures a Fake recorder.
type FakeConfig struct {
	// Clock stamps each event (default the real clock).
	Clock clock.PassiveClock
}

// Fake is an EventRecorder for tests: it keeps every event, in order,
// and reads them back. Its zero value works (events then have a zero
// Time). It is safe for concurrent use.
type Fake struct {
	clk    clock.PassiveClock
	mu     sync.Mutex
	events []Event
	// Dropped counts the calls whose object had no reference.
	dropped int
}

// NewFake returns a Fake recorder.
func NewFake(cfg FakeConfig) (*Fake, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Fake{clk: cfg.Clock}, nil
}

// Event records the event.
func (f *Fake) Event(obj runtime.Object, typ, reason, message string) {
	f.add(obj, typ, reason, message)
}

// Eventf records the event with the formatted message.
func (f *Fake) Eventf(obj runtime.Object, typ, reason, messageFmt string, args ...any) {
	f.add(obj, typ, reason, format(messageFmt, args))
}

func (f *Fake) add(obj runtime.Object, typ, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var now = f.now()
	e, err := makeEvent(obj, typ, reason, message, now)
	if err != nil {
		f.dropped++
		return
	}
	f.events = append(f.events, e)
}

func (f *Fake) now() (t time.Time) {
	if f.clk == nil {
		return t
	}
	return f.clk.Now()
}

// Events returns a copy of every event recorded so far, oldest first.
func (f *Fake) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.events...)
}

// Dropped is how many calls named an object without a reference.
func (f *Fake) Dropped() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dropped
}

// WithReason returns the events with the given reason, oldest first.
func (f *Fake) WithReason(reason string) []Event {
	return f.Filter(func(e Event) bool { return e.Reason == reason })
}

// For returns the events whose involved object has the given UID (a pod's
// UID; a node's name), oldest first.
func (f *Fake) For(uid types.UID) []Event {
	return f.Filter(func(e Event) bool { return e.Object.UID == uid })
}

// Filter returns the events keep accepts, oldest first.
func (f *Fake) Filter(keep func(Event) bool) []Event {
	var out []Event
	for _, e := range f.Events() {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Reasons returns the reasons of every event, oldest first: a short
// summary to compare in a test.
func (f *Fake) Reasons() []string {
	var out []string
	for _, e := range f.Events() {
		out = append(out, e.Reason)
	}
	return out
}

// String lists the events one per line (Event.String), for test failures.
func (f *Fake) String() string {
	var b strings.Builder
	for _, e := range f.Events() {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Reset forgets every event.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events, f.dropped = nil, 0
}
