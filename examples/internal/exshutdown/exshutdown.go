package exshutdown

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/agentshutdown"
)

// Flags are the graceful shutdown flags.
type Flags struct {
	GracePeriod             time.Duration
	GracePeriodCriticalPods time.Duration
	OnSIGTERM               bool
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.DurationVar(&f.GracePeriod, "shutdown-grace-period", 0, "graceful node shutdown: the whole time the pods get when the node shuts down (the kubelet's shutdownGracePeriod; 0: no graceful shutdown)")
	fs.DurationVar(&f.GracePeriodCriticalPods, "shutdown-grace-period-critical-pods", 0, "the critical pods' share of --shutdown-grace-period, given to them after the others (the kubelet's shutdownGracePeriodCriticalPods)")
	fs.BoolVar(&f.OnSIGTERM, "shutdown-on-sigterm", false, "on SIGTERM, shut the node down gracefully (kill the pods in the kubelet's order and budgets, refuse new ones) before stopping: for machines without logind, whose power-off sends SIGTERM; needs --shutdown-grace-period. A second SIGTERM stops at once")
}

// StopSignals are the signals that stop the agent at once: Ctrl-C, and
// SIGTERM unless --shutdown-on-sigterm.
func (f *Flags) StopSignals() []os.Signal {
	if f.OnSIGTERM {
		return []os.Signal{os.Interrupt}
	}
	return []os.Signal{os.Interrupt, syscall.SIGTERM}
}

// Wire wires the graceful shutdown into b when a grace period is given, by
// the flags or by cfg's priority groups (a nil Handle when not): cfg with
// the flags' grace periods (cfg may bring watchers, e.g. logind's, a
// logger and WaitForUnmount).
func (f *Flags) Wire(b *nodekit.Builder, cfg agentshutdown.Config) (*agentshutdown.Handle, error) {
	if f.GracePeriod == 0 && f.GracePeriodCriticalPods == 0 && len(cfg.Shutdown.GracePeriodByPodPriority) == 0 {
		if f.OnSIGTERM {
			return nil, errors.New("--shutdown-on-sigterm needs --shutdown-grace-period")
		}
		return nil, nil
	}
	cfg.Shutdown.GracePeriod, cfg.Shutdown.GracePeriodCriticalPods = f.GracePeriod, f.GracePeriodCriticalPods
	return agentshutdown.Wire(b, cfg), nil
}

// Run runs run until ctx ends. With --shutdown-on-sigterm and a Handle, a
// SIGTERM first shuts the node down gracefully (run's ctx still live), then
// ends run's ctx; a second SIGTERM ends it at once.
func (f *Flags) Run(ctx context.Context, h *agentshutdown.Handle, log *zap.Logger, run func(ctx context.Context) error) error {
	if !f.OnSIGTERM || h == nil {
		return run(ctx)
	}
	term := make(chan os.Signal, 2)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	return RunOn(ctx, h, log, term, run)
}

// RunOn is Run with the SIGTERMs delivered on term.
func RunOn(ctx context.Context, h *agentshutdown.Handle, log *zap.Logger, term <-chan os.Signal, run func(ctx context.Context) error) error {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			return
		case <-term:
		}
		log.Info("SIGTERM: shutting the node down gracefully (SIGTERM again to stop at once)")
		sctx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-term:
				log.Warn("second SIGTERM: stopping now")
				stop()
			case <-sctx.Done():
			}
		}()
		if err := h.Shutdown(sctx); err != nil {
			log.Warn("graceful node shutdown cut short", zap.Error(err))
		} else {
			log.Info("graceful node shutdown done: stopping")
		}
		stop()
		cancel()
	}()
	err := run(ctx)
	cancel()
	<-done
	return err
}
