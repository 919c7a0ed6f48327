package nodeshutdown

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Manager runs the graceful shutdown of a node: it kills the active pods
// group by group when told the node shuts down, refuses new pods meanwhile
// and reports the node not ready. See the package documentation.
type Manager struct {
	cfg    Config
	groups []PriorityGracePeriod
	log    *zap.Logger

	mu sync.Mutex
	// shuttingDown is true from the start of a shutdown until it is
	// cancelled; running is closed when the shutdown in progress ends
	// (nil when none runs).
	shuttingDown bool
	running      chan struct{}
	// completed: a shutdown went through every group since the last
	// cancellation.
	completed bool
	// finished is closed once a shutdown has gone through every group.
	finished     chan struct{}
	finishedOnce sync.Once
	// recorded: a shutdown has set the gauges, which LoadState then
	// leaves alone.
	recorded bool

	requests chan struct{}

	startTime, endTime prometheus.Gauge

	once lifecycle.Once
}

// New validates cfg (every problem at once, each naming its field) and
// fills defaults. It starts nothing.
func New(cfg Config) (*Manager, error) {
	groups, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:      cfg,
		groups:   groups,
		log:      cfg.Logger.Named("nodeshutdown"),
		finished: make(chan struct{}),
		requests: make(chan struct{}, 1),
	}
	if cfg.Registerer != nil {
		m.startTime = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_graceful_shutdown_start_time_seconds",
			Help: "Last graceful shutdown start time since unix epoch in seconds",
		})
		m.endTime = prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_graceful_shutdown_end_time_seconds",
			Help: "Last graceful shutdown end time since unix epoch in seconds",
		})
		for _, c := range []prometheus.Collector{m.startTime, m.endTime} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// Groups returns the priority groups, lowest priority first (those made
// from GracePeriod, or GracePeriodByPodPriority sorted).
func (m *Manager) Groups() []PriorityGracePeriod {
	return append([]PriorityGracePeriod(nil), m.groups...)
}

// PeriodRequested is the sum of the groups' grace periods: how long the
// shutdown may take, which logind's InhibitDelayMaxSec must allow.
func (m *Manager) PeriodRequested() time.Duration {
	var sum int64
	for _, g := range m.groups {
		sum += g.ShutdownGracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// ShuttingDown reports whether the node is shutting down (from the start of
// a shutdown until it is cancelled).
func (m *Manager) ShuttingDown() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shuttingDown
}

// ShutdownStatus returns ErrShuttingDown while the node shuts down, else
// nil: a node Ready check (nodestatus.SettersConfig.ReadyChecks), so the
// node reports Ready False, reason KubeletNotReady, message "node is
// shutting down", as the kubelet's does.
func (m *Manager) ShutdownStatus() error {
	if m.ShuttingDown() {
		return ErrShuttingDown
	}
	return nil
}

// Admit refuses every pod while the node shuts down, with the kubelet's
// reason (NodeShutdown) and message; it is an admission check of the sync
// loop (syncloop.AdmitHandler through a func).
func (m *Manager) Admit(_ *v1.Pod, _ []*v1.Pod) (admit bool, reason, message string) {
	if m.ShuttingDown() {
		return false, ReasonNotAdmitted, MessageNotAdmitted
	}
	return true, "", ""
}

// Finished is closed once a shutdown has killed every group (each pod
// stopped or its group's budget spent). An embedding program waits on it
// before it powers off or exits.
func (m *Manager) Finished() <-chan struct{} { return m.finished }

// Request asks Run to start a shutdown and returns at once: safe from a
// signal handler or any goroutine. Several requests before Run takes one
// are one.
func (m *Manager) Request() {
	select {
	case m.requests <- struct{}{}:
	default:
	}
}

// Run loads the state file (LoadState; a bad one is logged, not fatal),
// then starts a shutdown for each Request until ctx ends, and returns nil
// then (a shutdown in progress is cut short: its kills stop being waited
// for, the pod workers still carry them out, and no end time is recorded;
// see Shutdown). It follows the lifecycle contract.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	if _, err := m.LoadState(); err != nil {
		m.log.Error("graceful shutdown state not loaded: the shutdown gauges stay 0 until the next shutdown",
			zap.String("file", m.statePath()), zap.Error(err))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.requests:
			if err := m.Shutdown(ctx); err != nil && ctx.Err() == nil {
				m.log.Error("node shutdown", zap.Error(err))
			}
		}
	}
}

// Shutdown shuts the node down and returns when it is done: from now on
// the node is not ready and every new pod is refused; the active pods are
// killed group by group, lowest priority first, each group's pods together,
// each with its grace period capped by its group's budget (the pod's own
// terminationGracePeriodSeconds when smaller); the next group starts when
// every pod of the group has stopped (and, with WaitForUnmount, its volumes
// are unmounted) or the group's budget has passed. A killed pod's status is
// Failed (unless it had Succeeded), reason Terminated, the kubelet's
// message, and a DisruptionTarget condition (reason TerminationByKubelet).
//
// A call while a shutdown runs waits for it; a call after one finished
// (and was not cancelled) returns nil at once. When ctx ends the shutdown
// stops waiting and returns ctx's error; the node stays shutting down, and
// a later call kills the pods still active. Such a shutdown, cut short,
// records no end time (the gauge stays 0, the state file keeps only the
// start; see "The state file" in the package documentation) and logs
// that it was cut.
func (m *Manager) Shutdown(ctx context.Context) error {
	m.mu.Lock()
	if running := m.running; running != nil {
		m.mu.Unlock()
		select {
		case <-running:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.shuttingDown && m.completed {
		m.mu.Unlock()
		return nil
	}
	first := !m.shuttingDown
	m.shuttingDown = true
	m.recorded = true
	running := make(chan struct{})
	m.running = running
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.running = nil
		m.mu.Unlock()
		close(running)
	}()

	if first {
		m.cfg.Recorder.Event(kubetypes.NodeRef(m.cfg.NodeName), v1.EventTypeNormal, EventReason, EventShutdown)
		if m.cfg.OnChange != nil {
			m.cfg.OnChange()
		}
	}
	start := m.cfg.Clock.Now()
	if m.startTime != nil {
		m.startTime.Set(float64(start.Unix()))
		m.endTime.Set(0)
	}
	m.storeState(State{StartTime: start})
	m.log.Info("node shutting down: killing the pods", zap.Duration("period", m.PeriodRequested()))
	err := m.killPods(ctx)
	if err != nil {
		// No end time: the end says every group went through (each pod
		// stopped or its budget spent), which did not happen. The kubelet
		// stopped mid-shutdown leaves its file the same way.
		m.log.Info("node shutdown cut short before every group was done: no end time recorded",
			zap.Duration("after", m.cfg.Clock.Since(start)), zap.Error(err))
		return err
	}
	end := m.cfg.Clock.Now()
	if m.endTime != nil {
		m.endTime.Set(float64(end.Unix()))
	}
	m.storeState(State{StartTime: start, EndTime: end})
	m.log.Info("node shutdown: every group done", zap.Duration("took", m.cfg.Clock.Since(start)))
	m.mu.Lock()
	m.completed = m.shuttingDown
	m.mu.Unlock()
	m.finishedOnce.Do(func() { close(m.finished) })
	return nil
}

// CancelShutdown ends the shutdown state (logind's PrepareForShutdown(false)):
// the node reports ready again and admits pods. Pods already killed stay
// stopped. A shutdown in progress goes on with its groups.
func (m *Manager) CancelShutdown() {
	m.mu.Lock()
	was := m.shuttingDown
	m.shuttingDown, m.completed = false, false
	m.mu.Unlock()
	if !was {
		return
	}
	m.log.Info("node shutdown cancelled")
	m.cfg.Recorder.Event(kubetypes.NodeRef(m.cfg.NodeName), v1.EventTypeNormal, EventReason, EventCancelled)
	if m.cfg.OnChange != nil {
		m.cfg.OnChange()
	}
}

// killPods kills the active pods group by group. Kills still running when
// the last group's budget ends stop being waited for (their pod workers go
// on); killPods returns once every goroutine it started has returned.
func (m *Manager) killPods(ctx context.Context) error {
	var pods []*v1.Pod
	for _, p := range m.cfg.ActivePods() {
		if p != nil && !kubetypes.IsMirrorPod(p) {
			pods = append(pods, p)
		}
	}
	killCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	for _, g := range groupPods(m.groups, pods) {
		if len(g.pods) == 0 {
			continue
		}
		if err := m.killGroup(ctx, killCtx, &wg, g); err != nil {
			return err
		}
	}
	return nil
}

// killGroup starts the kills of g's pods and waits until they and their
// unmounts are done, or g's budget passed, or ctx ended.
func (m *Manager) killGroup(ctx, killCtx context.Context, wg *sync.WaitGroup, g group) error {
	budget := time.Duration(g.ShutdownGracePeriodSeconds) * time.Second
	m.log.Info("killing a priority group", zap.Int32("priority", g.Priority), zap.Duration("budget", budget), zap.Int("pods", len(g.pods)))
	// The unmount waits end with the group's budget, as the kubelet's.
	groupCtx, cancelGroup := context.WithCancel(killCtx)
	timer := m.cfg.Clock.NewTimer(budget)
	defer timer.Stop()
	var kills sync.WaitGroup
	now := metav1.NewTime(m.cfg.Clock.Now())
	for _, pod := range g.pods {
		grace := g.ShutdownGracePeriodSeconds
		if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t <= grace {
			grace = *t
		}
		kills.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer kills.Done()
			m.log.Debug("killing pod", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Int64("grace", grace))
			if err := m.cfg.KillPod(killCtx, pod, grace, killedStatus(pod, now)); err != nil {
				m.log.Info("pod kill not confirmed", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
			}
		}()
	}
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		kills.Wait()
		if m.cfg.WaitForUnmount == nil {
			return
		}
		for _, pod := range g.pods {
			if err := m.cfg.WaitForUnmount(groupCtx, pod); err != nil {
				m.log.Info("volumes not unmounted within the group's budget", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
				return
			}
		}
	}()
	defer cancelGroup()
	select {
	case <-done:
		// The kills also end when ctx does (killCtx is its child), and
		// select picks at random among ready cases: a group whose kills
		// returned for ctx is cut short, not done.
		if err := ctx.Err(); err != nil {
			return err
		}
		m.log.Info("priority group done", zap.Int32("priority", g.Priority))
		return nil
	case <-timer.C():
		m.log.Info("priority group's budget spent", zap.Int32("priority", g.Priority), zap.Duration("budget", budget))
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// killedStatus returns the status function of a pod killed by the
// shutdown: phase Failed (unless it succeeded), the kubelet's reason and
// message, and the DisruptionTarget condition.
func killedStatus(pod *v1.Pod, now metav1.Time) func(*v1.PodStatus) {
	return func(s *v1.PodStatus) {
		if s.Phase != v1.PodSucceeded {
			s.Phase = v1.PodFailed
		}
		s.Reason, s.Message = Reason, Message
		cond := v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            Message,
			LastTransitionTime: now,
		}
		for i := range s.Conditions {
			if s.Conditions[i].Type == v1.DisruptionTarget {
				if s.Conditions[i].Status == cond.Status {
					cond.LastTransitionTime = s.Conditions[i].LastTransitionTime
				}
				s.Conditions[i] = cond
				return
			}
		}
		s.Conditions = append(s.Conditions, cond)
	}
}
