package syncloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// healthStaleFactor: a runtime status older than this many
// RuntimeHealthPeriods no longer counts (the runtime is taken to be down
// until a new check succeeds).
const healthStaleFactor = 6

// healthState is the last runtime health check.
type healthState struct {
	mu           sync.Mutex
	checked      bool
	at           time.Time
	runtimeReady bool
	networkReady bool
	runtimeErr   error
	networkErr   error
}

// UpdateRuntimeHealth asks the runtime for its status (CRI Status) and
// records whether it and its network are ready. It returns the runtime's
// error, if any (a failed call or RuntimeReady not true). Run calls it
// every RuntimeHealthPeriod; without Config.RuntimeStatus it does nothing.
func (l *Loop) UpdateRuntimeHealth(ctx context.Context) error {
	if l.cfg.RuntimeStatus == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, l.cfg.RuntimeHealthPeriod*healthStaleFactor/2)
	resp, err := l.cfg.RuntimeStatus.Status(cctx, false)
	cancel()
	now := l.clock.Now()
	var rtReady, netReady bool
	var rtErr, netErr error
	if err != nil {
		rtErr = fmt.Errorf("%w: status call: %w", ErrRuntimeDown, err)
		netErr = rtErr
	} else {
		rtReady, rtErr = condition(resp, runtimeapi.RuntimeReady)
		netReady, netErr = condition(resp, runtimeapi.NetworkReady)
		if rtErr != nil {
			rtErr = fmt.Errorf("%w: %w", ErrRuntimeDown, rtErr)
		}
	}
	l.health.mu.Lock()
	wasReady := l.health.checked && l.health.runtimeReady
	l.health.checked = true
	l.health.at = now
	l.health.runtimeReady, l.health.networkReady = rtReady, netReady
	l.health.runtimeErr, l.health.networkErr = rtErr, netErr
	l.health.mu.Unlock()
	switch {
	case wasReady && !rtReady && err != nil && ctx.Err() != nil:
		// The call was cut short by shutdown: not news.
		l.log.Debug("container runtime status check interrupted by shutdown", zap.Error(rtErr))
	case wasReady && !rtReady:
		l.log.Warn("container runtime is down", zap.Error(rtErr))
	case !wasReady && rtReady:
		l.log.Info("container runtime is up")
	}
	return rtErr
}

// condition reads one condition of a CRI status; a missing condition is
// not ready.
func condition(resp *runtimeapi.StatusResponse, typ string) (bool, error) {
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() != typ {
			continue
		}
		if c.GetStatus() {
			return true, nil
		}
		return false, fmt.Errorf("%s=false reason:%s message:%s", typ, c.GetReason(), c.GetMessage())
	}
	return false, fmt.Errorf("%s condition not reported", typ)
}

// RuntimeReady reports the runtime health as last seen: runtimeReady is
// false while the runtime's status call fails or says it is not ready, or
// the PLEG is unhealthy; networkReady is the runtime's NetworkReady
// condition. err says why either is false. Without Config.RuntimeStatus the
// runtime and network are taken to be ready (the PLEG is still consulted).
func (l *Loop) RuntimeReady() (runtimeReady, networkReady bool, err error) {
	runtimeReady, networkReady = true, true
	var errs []error
	if l.cfg.RuntimeStatus != nil {
		l.health.mu.Lock()
		switch {
		case !l.health.checked:
			runtimeReady, networkReady = false, false
			errs = append(errs, fmt.Errorf("%w: runtime status not checked yet", ErrRuntimeDown))
		case l.clock.Since(l.health.at) > l.cfg.RuntimeHealthPeriod*healthStaleFactor:
			runtimeReady, networkReady = false, false
			errs = append(errs, fmt.Errorf("%w: last runtime status is older than %v", ErrRuntimeDown, l.cfg.RuntimeHealthPeriod*healthStaleFactor))
		default:
			runtimeReady, networkReady = l.health.runtimeReady, l.health.networkReady
			if l.health.runtimeErr != nil {
				errs = append(errs, l.health.runtimeErr)
			}
			if l.health.networkErr != nil && !errors.Is(l.health.networkErr, ErrRuntimeDown) {
				errs = append(errs, fmt.Errorf("%w: %w", ErrNetworkNotReady, l.health.networkErr))
			}
		}
		l.health.mu.Unlock()
	}
	if l.cfg.PLEG != nil {
		if ok, perr := l.cfg.PLEG.Healthy(); !ok {
			runtimeReady = false
			if perr == nil {
				perr = errors.New("unhealthy")
			}
			errs = append(errs, fmt.Errorf("%w: %w", ErrPLEGUnhealthy, perr))
		}
	}
	return runtimeReady, networkReady, errors.Join(errs...)
}

// runtimeErr is the loop's health gate: nil when pods may be dispatched.
// A runtime never checked, or checked too long ago, is checked at once.
func (l *Loop) runtimeErr(ctx context.Context) error {
	if l.cfg.RuntimeStatus != nil {
		l.health.mu.Lock()
		stale := !l.health.checked || l.clock.Since(l.health.at) > l.cfg.RuntimeHealthPeriod*healthStaleFactor
		l.health.mu.Unlock()
		if stale {
			_ = l.UpdateRuntimeHealth(ctx)
		}
	}
	rt, _, err := l.RuntimeReady()
	if rt {
		return nil
	}
	return err
}

// runHealth checks the runtime at once and every RuntimeHealthPeriod until
// ctx ends.
func (l *Loop) runHealth(ctx context.Context) error {
	t := l.clock.NewTicker(l.cfg.RuntimeHealthPeriod)
	defer t.Stop()
	for {
		if err := l.UpdateRuntimeHealth(ctx); err != nil && ctx.Err() == nil {
			l.log.Debug("runtime health check", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}
