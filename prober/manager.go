package prober

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of a probe's fields left zero (the API's defaults).
const (
	DefaultPeriodSeconds    = 10
	DefaultTimeoutSeconds   = 1
	DefaultSuccessThreshold = 1
	DefaultFailureThreshold = 3
	// DefaultUpdatesBuffer is the capacity of the Updates channel.
	DefaultUpdatesBuffer = 20
)

// StatusGetter gives a pod's current API status: the container IDs, states
// and Started flags the workers go by (the sync loop's status manager
// satisfies it).
type StatusGetter interface {
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
}

// Config configures a Manager. Status is required; Exec is needed for exec
// probes (without it they error and never produce a result).
type Config struct {
	// Status gives the pods' API statuses. Required.
	Status StatusGetter
	// Exec runs exec probes' commands (the CRI's ExecSync).
	Exec ExecRunner

	// ExecProber, HTTPProber, TCPProber and GRPCProber replace the probe
	// kinds (tests use fakes); nil means NewExecProber(Exec),
	// NewHTTPProber(), NewTCPProber() and NewGRPCProber().
	ExecProber ExecProber
	HTTPProber HTTPProber
	TCPProber  TCPProber
	GRPCProber GRPCProber

	// Jitter gives the first delay of a worker started within one period of
	// Run: a value in [0, period). Nil means uniformly random.
	Jitter func(period time.Duration) time.Duration
	// UpdatesBuffer is the capacity of Updates (default 20); negative is
	// an error.
	UpdatesBuffer int

	// Recorder records the kubelet's probe events on the container:
	// Unhealthy for every failed or errored probe, ProbeWarning for an
	// HTTP probe that succeeded with a warning. Nil records none.
	Recorder kubetypes.EventRecorder

	Clock  clock.WithTicker
	Logger *zap.Logger
	// Registerer, if set, receives the probe counter
	// (prober_probe_total{probe_type,result}).
	Registerer prometheus.Registerer
}

// Manager runs the probes of the pods it is given: one worker goroutine
// per (pod, container, probe type). It keeps the latest result of each
// container instance and sends every change on Updates. Create it with
// New; it probes only while Run runs.
type Manager struct {
	cfg     Config
	clock   clock.WithTicker
	log     *zap.Logger
	rec     kubetypes.EventRecorder
	probers probers
	results *results
	updates chan Update
	jitter  func(time.Duration) time.Duration
	probes  *prometheus.CounterVec

	mu      sync.Mutex
	workers map[workerKey]*worker
	ctx     context.Context
	start   time.Time
	once    lifecycle.Once
	ran     bool
	done    bool
	wg      sync.WaitGroup
}

type workerKey struct {
	uid       types.UID
	container string
	t         ProbeType
}

// New validates cfg, fills its defaults and returns a Manager. It starts
// nothing and does no I/O.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.Status == nil {
		errs = append(errs, fmt.Errorf("%w: Status is required", ErrInvalidConfig))
	}
	if cfg.UpdatesBuffer < 0 {
		errs = append(errs, fmt.Errorf("%w: UpdatesBuffer (%d) is negative", ErrInvalidConfig, cfg.UpdatesBuffer))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.UpdatesBuffer == 0 {
		cfg.UpdatesBuffer = DefaultUpdatesBuffer
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	m := &Manager{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger.Named("prober"),
		rec:     kubetypes.RecorderOrNop(cfg.Recorder),
		results: newResults(),
		updates: make(chan Update, cfg.UpdatesBuffer),
		jitter:  cfg.Jitter,
		workers: make(map[workerKey]*worker),
		probers: probers{exec: cfg.ExecProber, http: cfg.HTTPProber, tcp: cfg.TCPProber, grpc: cfg.GRPCProber},
	}
	if m.jitter == nil {
		m.jitter = func(p time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(p))) }
	}
	if m.probers.exec == nil {
		m.probers.exec = NewExecProber(cfg.Exec)
	}
	if m.probers.http == nil {
		m.probers.http = NewHTTPProber()
	}
	if m.probers.tcp == nil {
		m.probers.tcp = NewTCPProber()
	}
	if m.probers.grpc == nil {
		m.probers.grpc = NewGRPCProber()
	}
	if cfg.Registerer != nil {
		m.probes = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "prober_probe_total",
			Help: "Probes run, by probe type and result.",
		}, []string{"probe_type", "result"})
		if err := cfg.Registerer.Register(m.probes); err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
	}
	return m, nil
}

// Updates delivers every change of a result (the first result of a
// container instance included). It must be read: a worker waits while it
// is full.
func (m *Manager) Updates() <-chan Update { return m.updates }

// Run starts the workers of the pods added so far (and those added later)
// and returns nil once ctx is done and every worker has exited.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	m.mu.Lock()
	m.ran, m.ctx, m.start = true, ctx, m.clock.Now()
	for _, w := range m.workers {
		m.startLocked(w)
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.mu.Lock()
	m.done = true
	m.mu.Unlock()
	m.wg.Wait()
	return nil
}

func (m *Manager) startLocked(w *worker) {
	if w.started {
		return
	}
	w.started = true
	m.wg.Add(1)
	go w.run(m.ctx)
}

// probedContainers are the containers of pod that may have probes: the
// regular ones and the restartable init containers (sidecars).
func probedContainers(pod *v1.Pod, fn func(c *v1.Container)) {
	for i := range pod.Spec.Containers {
		fn(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			fn(c)
		}
	}
}

func probeOf(c *v1.Container, t ProbeType) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	}
	return nil
}

// AddPod starts a worker for every probe of the pod's containers that has
// none yet; workers that exist get the new version of the pod (its
// deletion timestamp). Calling it on every sync is cheap.
func (m *Manager) AddPod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done {
		return
	}
	probedContainers(pod, func(c *v1.Container) {
		for _, t := range [...]ProbeType{Startup, Readiness, Liveness} {
			p := probeOf(c, t)
			if p == nil {
				continue
			}
			k := workerKey{pod.UID, c.Name, t}
			if w, ok := m.workers[k]; ok {
				w.pod.Store(pod)
				continue
			}
			w := newWorker(m, t, pod, c, p)
			m.workers[k] = w
			if m.ran {
				m.startLocked(w)
			}
		}
	})
}

// StopLivenessAndStartup stops the liveness and startup workers of the
// pod's containers (the pod is terminating: nothing may restart them).
func (m *Manager) StopLivenessAndStartup(pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.stopMatching(func(k workerKey) bool { return k.uid == pod.UID && (k.t == Liveness || k.t == Startup) })
}

// RemovePod stops every worker of the pod.
func (m *Manager) RemovePod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.stopMatching(func(k workerKey) bool { return k.uid == pod.UID })
}

// CleanupPods stops the workers of every pod not in desired.
func (m *Manager) CleanupPods(desired map[types.UID]struct{}) {
	m.stopMatching(func(k workerKey) bool { _, ok := desired[k.uid]; return !ok })
}

func (m *Manager) stopMatching(match func(workerKey) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, w := range m.workers {
		if !match(k) {
			continue
		}
		if !w.started {
			delete(m.workers, k)
			continue
		}
		w.stop()
	}
}

// removeWorker forgets w (called by w as it exits).
func (m *Manager) removeWorker(w *worker) {
	m.mu.Lock()
	if m.workers[w.key] == w {
		delete(m.workers, w.key)
	}
	m.mu.Unlock()
}

func (m *Manager) hasWorker(uid types.UID, container string, t ProbeType) (*worker, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w, ok := m.workers[workerKey{uid, container, t}]
	return w, ok
}

// Workers returns the number of workers (running or waiting for Run).
func (m *Manager) Workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers)
}

// Result returns the latest result of the probe of type t of the container
// instance containerID (an API ID "<runtime>://<id>" or a raw CRI id); ok
// is false when there is none (no such worker, or it has not seen the
// instance yet).
func (m *Manager) Result(t ProbeType, containerID string) (r Result, ok bool) {
	return m.results.get(containerID, t)
}

// set records a result and sends an Update when it changed.
func (m *Manager) set(ctx context.Context, stopped <-chan struct{}, uid types.UID, containerID string, t ProbeType, r Result) {
	if !m.results.set(containerID, t, r) {
		return
	}
	select {
	case m.updates <- Update{PodUID: uid, ContainerID: containerID, Type: t, Result: r}:
	case <-ctx.Done():
	case <-stopped:
	}
}

// RuntimeResults is the runtime engine's view of the results
// (kuberuntime.ProbeResults): containers whose liveness or startup probe
// failed are restarted.
type RuntimeResults struct{ m *Manager }

// RuntimeResults returns the Manager as a kuberuntime.ProbeResults.
func (m *Manager) RuntimeResults() RuntimeResults { return RuntimeResults{m} }

// Liveness is the liveness result of the container (CRI id); Unknown when
// there is none.
func (r RuntimeResults) Liveness(containerID string) Result {
	v, _ := r.m.results.get(containerID, Liveness)
	return v
}

// Startup is the startup result of the container (CRI id); Unknown when
// there is none.
func (r RuntimeResults) Startup(containerID string) Result {
	v, _ := r.m.results.get(containerID, Startup)
	return v
}

// StatusResults is the pod status' view of the results (the sync loop's
// ProbeState): started from the startup probe, ready from the readiness
// probe, keyed by API container ID.
type StatusResults struct{ m *Manager }

// StatusResults returns the Manager as a status ProbeState.
func (m *Manager) StatusResults() StatusResults { return StatusResults{m} }

// Startup reports whether the container's startup probe succeeded; ok is
// false when there is no result.
func (s StatusResults) Startup(containerID string) (started, ok bool) {
	v, ok := s.m.results.get(containerID, Startup)
	return v == Success, ok
}

// Readiness reports whether the container's readiness probe succeeded; ok
// is false when there is no result.
func (s StatusResults) Readiness(containerID string) (ready, ok bool) {
	v, ok := s.m.results.get(containerID, Readiness)
	return v == Success, ok
}

// UpdatePodStatus sets Started and Ready of every container status of
// status as the probes say (the kubelet's UpdatePodStatus): started from
// the startup result (no result: started if the container runs and has no
// startup worker); ready if running, started and its readiness succeeded
// (or it has no readiness worker). A container that is not ready has its
// readiness worker probe at once. Non-sidecar init containers are ready
// when they exited 0.
func (m *Manager) UpdatePodStatus(pod *v1.Pod, status *v1.PodStatus) {
	if pod == nil || status == nil {
		return
	}
	sidecar := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		sidecar[c.Name] = c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
	}
	update := func(cs *v1.ContainerStatus, init bool) {
		started := m.isStarted(pod.UID, cs)
		cs.Started = &started
		if init && !sidecar[cs.Name] {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
			return
		}
		if !started {
			return
		}
		ready := false
		if cs.State.Running != nil {
			if r, ok := m.results.get(cs.ContainerID, Readiness); ok && r == Success {
				ready = true
			} else if w, ok := m.hasWorker(pod.UID, cs.Name, Readiness); ok {
				w.triggerNow()
			} else {
				ready = true
			}
		}
		cs.Ready = ready
	}
	for i := range status.ContainerStatuses {
		update(&status.ContainerStatuses[i], false)
	}
	for i := range status.InitContainerStatuses {
		update(&status.InitContainerStatuses[i], true)
	}
}

func (m *Manager) isStarted(uid types.UID, cs *v1.ContainerStatus) bool {
	if cs.State.Running == nil {
		return false
	}
	if r, ok := m.results.get(cs.ContainerID, Startup); ok {
		return r == Success
	}
	if cs.Started != nil && *cs.Started {
		return true
	}
	_, has := m.hasWorker(uid, cs.Name, Startup)
	return !has
}
