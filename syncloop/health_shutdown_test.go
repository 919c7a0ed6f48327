package syncloop

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// hsStatus answers like the wrapped runtime until its ctx is done, then
// with the ctx's error (a call cut short).
type hsStatus struct{ rt RuntimeStatusGetter }

func (s hsStatus) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.rt.Status(ctx, verbose)
}

// A runtime status check cut short by shutdown is logged at Debug, not as
// the runtime going down; a real failure still warns.
func TestRuntimeHealthShutdownNotWarned(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	e := ltNew(t, clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), func(c *Config) {
		c.RuntimeStatus = hsStatus{rt: c.RuntimeStatus}
		c.Logger = zap.New(core)
	})
	if err := e.loop.UpdateRuntimeHealth(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := e.loop.UpdateRuntimeHealth(ctx); err == nil {
		t.Fatal("a cut-short check reported no error")
	}
	if n := logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 0 {
		t.Fatalf("%d warnings for a check cut short by shutdown: %v", n, logs.All())
	}
	if logs.FilterMessageSnippet("interrupted by shutdown").FilterLevelExact(zapcore.DebugLevel).Len() != 1 {
		t.Fatalf("no debug message: %v", logs.All())
	}
	// Back up, then a real failure: warned.
	if err := e.loop.UpdateRuntimeHealth(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.rt.SetRuntimeReady(false)
	if err := e.loop.UpdateRuntimeHealth(t.Context()); err == nil {
		t.Fatal("runtime not ready reported no error")
	}
	if logs.FilterMessage("container runtime is down").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
		t.Fatalf("real failure not warned: %v", logs.All())
	}
}
