package nodekit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
)

// recorder notes the order in which parts stop.
type recorder struct {
	mu      sync.Mutex
	stopped []string
}

func (r *recorder) part(name string, fail error, trigger <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-trigger:
			return fail
		}
		r.mu.Lock()
		r.stopped = append(r.stopped, name)
		r.mu.Unlock()
		return ctx.Err()
	}
}

func TestRunnerStopsInReverseOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		ctx, cancel := context.WithCancel(t.Context())
		r := newRunner(ctx, 4)
		for _, n := range []string{"a", "b", "c", "d"} {
			r.start(n, rec.part(n, nil, nil))
		}
		cancel()
		if err := r.wait(ctx, zap.NewNop()); err != nil {
			t.Fatalf("wait = %v, want nil after a cancel", err)
		}
		if got := strings.Join(rec.stopped, ","); got != "d,c,b,a" {
			t.Errorf("stop order %s, want d,c,b,a", got)
		}
	})
}

func TestRunnerFailureStopsTheRest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		boom := errors.New("boom")
		trigger := make(chan struct{})
		r := newRunner(t.Context(), 3)
		r.start("a", rec.part("a", nil, nil))
		r.start("b", rec.part("b", boom, trigger))
		r.start("c", rec.part("c", nil, nil))
		close(trigger)
		err := r.wait(t.Context(), zap.NewNop())
		if !errors.Is(err, ErrPartStopped) || !errors.Is(err, boom) || !strings.Contains(err.Error(), ": b: ") {
			t.Fatalf("wait = %v, want b's failure", err)
		}
		if got := strings.Join(rec.stopped, ","); got != "c,a" {
			t.Errorf("stop order %s, want c,a", got)
		}
	})
}

func TestRunnerEarlyNilIsFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunner(t.Context(), 1)
		r.start("quiet", func(context.Context) error { return nil })
		err := r.wait(t.Context(), zap.NewNop())
		if !errors.Is(err, ErrPartStopped) || !strings.Contains(err.Error(), "quiet: returned early") {
			t.Fatalf("wait = %v", err)
		}
	})
}
