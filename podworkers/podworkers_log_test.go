package podworkers

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nodekit/nodekit/kuberuntime"
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
	withWorkers(t, Config{Logger: zap.New(core)}, func(t *testing.T, e *env) {
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

// A sync cut short because the pod workers stop fails with whatever the
// runtime says (a gRPC Canceled status is not context.Canceled): that is
// the shutdown, logged at Debug, not a failed sync at Error.
func TestSyncCutShortByStopIsNoError(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	withWorkers(t, Config{Logger: zap.New(core)}, func(t *testing.T, e *env) {
		e.syncer.cancelErr = errors.New("StopSandbox x: rpc error: code = Canceled desc = context canceled")
		e.syncer.blockOn("sync", "1")
		e.update(SyncPodCreate, newPod("1", "web"))
	})
	if n := logs.FilterMessage("pod sync failed").Len(); n != 0 {
		t.Errorf("%d sync failures logged for a sync the stop cut short", n)
	}
	if n := logs.FilterMessage("sync cancelled").Len(); n != 1 {
		t.Errorf("%d shutdown notes, want 1", n)
	}
}
