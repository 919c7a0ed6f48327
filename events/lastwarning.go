package events

import (
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// DefaultMaxPods is LastWarningsConfig.MaxPods's default.
const DefaultMaxPods = 1000

// LastWarningsConfig configures a LastWarnings tracker.
type LastWarningsConfig struct {
	// Clock stamps each warning (default the real clock).
	Clock clock.PassiveClock
	// MaxPods bounds how many pods are tracked (default DefaultMaxPods):
	// past it the pod whose last warning is the oldest is forgotten.
	MaxPods int
}

// LastWarnings is an EventRecorder that keeps, per pod, its last Warning
// event (a table of pods shows it, as examples/standalone does). Normal
// events and events about other objects are ignored. Safe for concurrent
// use; Forget a removed pod.
type LastWarnings struct {
	clk clock.PassiveClock
	max int

	mu   sync.Mutex
	last map[types.UID]Event
}

// NewLastWarnings returns a LastWarnings tracker.
func NewLastWarnings(cfg LastWarningsConfig) (*LastWarnings, error) {
	if cfg.MaxPods < 0 {
		return nil, fmt.Errorf("%w: MaxPods %d is negative", ErrInvalidConfig, cfg.MaxPods)
	}
	if cfg.MaxPods == 0 {
		cfg.MaxPods = DefaultMaxPods
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &LastWarnings{clk: cfg.Clock, max: cfg.MaxPods, last: map[types.UID]Event{}}, nil
}

// Event keeps a pod's Warning event.
func (l *LastWarnings) Event(obj runtime.Object, typ, reason, message string) {
	if typ != v1.EventTypeWarning {
		return
	}
	l.add(obj, typ, reason, message)
}

// Eventf keeps a pod's Warning event with the formatted message.
func (l *LastWarnings) Eventf(obj runtime.Object, typ, reason, messageFmt string, args ...any) {
	if typ != v1.EventTypeWarning {
		return
	}
	l.add(obj, typ, reason, format(messageFmt, args))
}

func (l *LastWarnings) add(obj runtime.Object, typ, reason, message string) {
	e, err := makeEvent(obj, typ, reason, message, l.clk.Now())
	if err != nil || e.Object.Kind != "Pod" || e.Object.UID == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, known := l.last[e.Object.UID]; !known && len(l.last) >= l.max {
		var oldest types.UID
		var first = true
		for uid, w := range l.last {
			if first || w.Time.Before(l.last[oldest].Time) {
				oldest, first = uid, false
			}
		}
		delete(l.last, oldest)
	}
	l.last[e.Object.UID] = e
}

// Last returns the pod's last Warning event, if any.
func (l *LastWarnings) Last(uid types.UID) (Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.last[uid]
	return e, ok
}

// Forget drops what is kept for the pod.
func (l *LastWarnings) Forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.last, uid)
}

// ForgetPod is Forget: the agent's housekeeping calls it once a pod is
// gone (through Multi, which hands it to every recorder that has it).
func (l *LastWarnings) ForgetPod(uid types.UID) { l.Forget(uid) }

// Len is how many pods have a warning kept.
func (l *LastWarnings) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last)
}
