package imagegc_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/nodekit/nodekit/eviction/imagegc"
)

// TestRun: Run detects the images at once, collects every Period, refuses
// a second Run, and returns once its ctx ends.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		clk := start()
		f := &images{capacity: 1000, available: 0}
		f.add("sha256:a", 500)
		m := newManager(t, f, clk, func(c *imagegc.Config) { c.Period = time.Minute })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if err := m.Run(ctx); !errors.Is(err, imagegc.ErrAlreadyRan) {
			t.Fatalf("second Run = %v", err)
		}
		imgs := m.Images()
		if len(imgs) != 1 || !imgs[0].FirstDetected.Equal(clk.Now()) {
			t.Fatalf("records %+v: want the image detected at Run's start %v", imgs, clk.Now())
		}
		clk.Step(time.Minute) // one period, image still younger than MinAge
		synctest.Wait()
		if got := f.removedIDs(); len(got) != 0 {
			t.Fatalf("removed %v before MinAge", got)
		}
		clk.Step(time.Minute)
		synctest.Wait()
		if got := f.removedIDs(); len(got) != 1 {
			t.Fatalf("removed %v after two periods, want the image", got)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}
