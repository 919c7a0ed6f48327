package prober

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// worker runs one probe of one container of one pod, period after period,
// and records its result for the container instance it currently sees.
type worker struct {
	m         *Manager
	key       workerKey
	t         ProbeType
	pod       atomic.Pointer[v1.Pod]
	container *v1.Container
	spec      v1.Probe // defaults filled
	initial   Result
	log       *zap.Logger

	started  bool // guarded by m.mu
	stopOnce sync.Once
	stopped  chan struct{}
	trigger  chan struct{}

	// Only touched by the worker's goroutine (or a test calling doProbe).
	containerID string
	lastResult  Result
	resultRun   int
	onHold      bool
}

func newWorker(m *Manager, t ProbeType, pod *v1.Pod, c *v1.Container, p *v1.Probe) *worker {
	w := &worker{
		m:         m,
		key:       workerKey{pod.UID, c.Name, t},
		t:         t,
		container: c.DeepCopy(),
		spec:      withDefaults(p),
		stopped:   make(chan struct{}),
		trigger:   make(chan struct{}, 1),
		log: m.log.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("container", c.Name),
			zap.Stringer("probe", t)),
	}
	w.pod.Store(pod)
	switch t {
	case Readiness:
		w.initial = Failure
	case Liveness:
		w.initial = Success
	default:
		w.initial = Unknown
	}
	return w
}

// withDefaults copies p and fills the fields left zero.
func withDefaults(p *v1.Probe) v1.Probe {
	s := *p.DeepCopy()
	if s.PeriodSeconds <= 0 {
		s.PeriodSeconds = DefaultPeriodSeconds
	}
	if s.TimeoutSeconds <= 0 {
		s.TimeoutSeconds = DefaultTimeoutSeconds
	}
	if s.SuccessThreshold <= 0 {
		s.SuccessThreshold = DefaultSuccessThreshold
	}
	if s.FailureThreshold <= 0 {
		s.FailureThreshold = DefaultFailureThreshold
	}
	return s
}

// stop asks the worker to exit (idempotent, non-blocking).
func (w *worker) stop() { w.stopOnce.Do(func() { close(w.stopped) }) }

// triggerNow asks for a probe before the next period (non-blocking).
func (w *worker) triggerNow() {
	select {
	case w.trigger <- struct{}{}:
	default:
	}
}

// run probes until ctx ends, the worker is stopped or doProbe says the
// container will not run again. A worker started within one period of Run
// first waits a random part of the period, so that workers spread out.
func (w *worker) run(ctx context.Context) {
	defer w.m.wg.Done()
	defer func() {
		if w.containerID != "" {
			w.m.results.remove(w.containerID, w.t)
		}
		w.m.removeWorker(w)
	}()
	period := time.Duration(w.spec.PeriodSeconds) * time.Second
	w.m.mu.Lock()
	start := w.m.start
	w.m.mu.Unlock()
	if period > w.m.clock.Since(start) {
		if d := w.m.jitter(period); d > 0 {
			t := w.m.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-w.stopped:
				t.Stop()
				return
			case <-t.C():
			}
		}
	}
	ticker := w.m.clock.NewTicker(period)
	defer ticker.Stop()
	for w.doProbe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-w.stopped:
			return
		case <-ticker.C():
		case <-w.trigger:
		}
	}
}

// set records r for the current container instance.
func (w *worker) set(ctx context.Context, r Result) {
	w.m.set(ctx, w.stopped, w.key.uid, w.containerID, w.t, r)
}

// doProbe runs one probe if the container is in a state to be probed and
// records the result once it has repeated its threshold. It returns false
// when the worker should exit.
func (w *worker) doProbe(ctx context.Context) (keepGoing bool) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("probe panicked", zap.Any("panic", r))
			keepGoing = true
		}
	}()
	pod := w.pod.Load()
	status, ok := w.m.cfg.Status.GetPodStatus(w.key.uid)
	if !ok {
		return true // no status yet
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		return false
	}
	cs := findStatus(status.ContainerStatuses, w.container.Name)
	if cs == nil || cs.ContainerID == "" {
		cs = findStatus(status.InitContainerStatuses, w.container.Name)
		if cs == nil || cs.ContainerID == "" {
			return true // not created yet
		}
	}
	if w.containerID != cs.ContainerID {
		if w.containerID != "" {
			w.m.results.remove(w.containerID, w.t)
		}
		w.containerID = cs.ContainerID
		w.set(ctx, w.initial)
		w.onHold = false
		w.lastResult, w.resultRun = Unknown, 0
	}
	if w.onHold {
		return true
	}
	if cs.State.Running == nil {
		w.set(ctx, Failure)
		if cs.State.Terminated == nil {
			return true
		}
		return w.willRestart(pod, cs.State.Terminated.ExitCode)
	}
	if pod.DeletionTimestamp != nil && (w.t == Liveness || w.t == Startup) {
		w.set(ctx, Success)
		return false
	}
	if int32(w.m.clock.Since(cs.State.Running.StartedAt.Time)/time.Second) < w.spec.InitialDelaySeconds {
		return true
	}
	started := cs.Started != nil && *cs.Started
	if started == (w.t == Startup) {
		// Startup probes stop once started; the others wait for it.
		return true
	}
	r, out, err := w.m.probers.runWithRetries(ctx, &w.spec, pod, &status, w.container, w.containerID)
	if ctx.Err() != nil {
		return true
	}
	w.count(r, err)
	ref := kubetypes.ContainerRef(pod, w.container.Name)
	if err != nil {
		w.log.Debug("probe errored", zap.Error(err))
		w.m.rec.Eventf(ref, v1.EventTypeWarning, kubetypes.ReasonUnhealthy, "%s probe errored and resulted in %s state: %s",
			w.t, strings.ToLower(r.String()), err)
		return true
	}
	switch {
	case r == Failure:
		w.log.Debug("probe failed", zap.String("output", out))
		w.m.rec.Eventf(ref, v1.EventTypeWarning, kubetypes.ReasonUnhealthy, "%s probe failed: %s", w.t, out)
	case r == Success && strings.HasPrefix(out, redirectWarning):
		w.m.rec.Eventf(ref, v1.EventTypeWarning, kubetypes.ReasonProbeWarning, "%s probe warning: %s", w.t, out)
	}
	if r == w.lastResult {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = r, 1
	}
	if (r == Failure && w.resultRun < int(w.spec.FailureThreshold)) ||
		(r == Success && w.resultRun < int(w.spec.SuccessThreshold)) {
		return true
	}
	w.set(ctx, r)
	if (w.t == Liveness && r == Failure) || w.t == Startup {
		// Nothing to do until the container is replaced.
		w.onHold, w.resultRun = true, 0
	}
	return true
}

// willRestart: the exited container will be started again.
func (w *worker) willRestart(pod *v1.Pod, exitCode int32) bool {
	if c := w.container; c.RestartPolicy != nil {
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyNever:
			return false
		}
		return exitCode != 0
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

func (w *worker) count(r Result, err error) {
	if w.m.probes == nil {
		return
	}
	label := "unknown"
	if err == nil {
		switch r {
		case Success:
			label = "successful"
		case Failure:
			label = "failed"
		}
	}
	w.m.probes.WithLabelValues(w.t.String(), label).Inc()
}

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
