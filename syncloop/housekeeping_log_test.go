package syncloop

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

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
