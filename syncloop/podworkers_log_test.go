package syncloop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

func TestBackOffOnly(t *testing.T) {
	other := errors.New("disk full")
	clbo := fmt.Errorf("StartContainer main: %w", fmt.Errorf("%w: back-off 10s", kuberuntime.ErrCrashLoopBackOff))
	ipbo := fmt.Errorf("PullImage main: %w", kuberuntime.ErrImagePullBackOff)
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"other", other, false},
		{"crash-loop back-off", clbo, true},
		{"image-pull back-off", ipbo, true},
		{"join of back-offs", errors.Join(clbo, ipbo), true},
		{"wrapped join of back-offs", fmt.Errorf("sync: %w", errors.Join(clbo, ipbo)), true},
		{"back-off joined with a real failure", errors.Join(clbo, other), false},
		{"wrapped mixed join", fmt.Errorf("sync: %w", errors.Join(other, ipbo)), false},
		{"empty join", errors.Join(nil), false},
		{"ErrImagePull is a failure", fmt.Errorf("x: %w", kuberuntime.ErrImagePull), false},
	} {
		if got := backOffOnly(c.err); got != c.want {
			t.Errorf("%s: backOffOnly(%v) = %v; want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestSyncFailureLogLevel: a sync that only waits out a back-off is logged
// at Info; any other failure at Error.
func TestSyncFailureLogLevel(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	withWorkers(t, PodWorkersConfig{Logger: zap.New(core)}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.syncer.setErr("1", fmt.Errorf("StartContainer main: %w", kuberuntime.ErrCrashLoopBackOff))
		e.update(SyncPodSync, newPod("1", "web"))
		e.syncer.setErr("1", errors.Join(
			fmt.Errorf("StartContainer a: %w", kuberuntime.ErrCrashLoopBackOff),
			fmt.Errorf("PullImage b: %w", kuberuntime.ErrImagePullBackOff)))
		e.update(SyncPodSync, newPod("1", "web"))
		e.syncer.setErr("1", errors.New("CreateContainer main: boom"))
		e.update(SyncPodSync, newPod("1", "web"))
		synctest.Wait()
	})
	var info, errs int
	for _, l := range logs.All() {
		switch {
		case l.Message == "pod sync waiting on a back-off" && l.Level == zapcore.InfoLevel:
			info++
		case l.Message == "pod sync failed" && l.Level == zapcore.ErrorLevel:
			errs++
		case l.Level >= zapcore.WarnLevel:
			t.Errorf("unexpected %v log: %s %v", l.Level, l.Message, l.ContextMap())
		}
	}
	if info != 2 || errs != 1 {
		t.Errorf("back-off logs at Info: %d, failures at Error: %d; want 2 and 1", info, errs)
	}
}

// cancellingRuntime cancels the loop's context while housekeeping lists the
// runtime's pods, as a shutdown arriving mid-cleanup does.
type cancellingRuntime struct {
	*ltStub
	cancel context.CancelFunc
	fail   bool // fail without a cancellation
}

func (c *cancellingRuntime) GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error) {
	if c.fail {
		return nil, errors.New("runtime unreachable")
	}
	c.cancel()
	return nil, ctx.Err()
}

// TestHousekeepingCutShortByShutdownIsNoWarning: a cleanup interrupted
// because the loop is stopping is logged at Debug, a real failure at Warn.
func TestHousekeepingCutShortByShutdownIsNoWarning(t *testing.T) {
	for _, fail := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			core, logs := observer.New(zapcore.DebugLevel)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rt := &cancellingRuntime{cancel: cancel, fail: fail}
			l, _, _ := ltStubLoop(t, clk, func(cfg *Config) {
				cfg.Logger = zap.New(core)
				cfg.SyncPeriod = time.Hour // only the housekeeping tick fires
				rt.ltStub = cfg.Runtime.(*ltStub)
				cfg.Runtime = rt
			})
			res := make(chan bool, 1)
			go func() { res <- l.Iterate(ctx) }()
			synctest.Wait()
			clk.Step(DefaultHousekeepingPeriod)
			<-res
			warned := logs.FilterMessage("housekeeping failed").FilterLevelExact(zapcore.WarnLevel).Len()
			interrupted := logs.FilterMessage("housekeeping interrupted by shutdown").Len()
			if fail && (warned != 1 || interrupted != 0) {
				t.Errorf("a real failure: %d warnings, %d shutdown notes; want 1 and 0", warned, interrupted)
			}
			if !fail && (warned != 0 || interrupted != 1) {
				t.Errorf("cut short by shutdown: %d warnings, %d shutdown notes; want 0 and 1", warned, interrupted)
			}
		})
	}
}
