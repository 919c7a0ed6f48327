package kuberuntime

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// The CRI operation metrics recorded by Instrument, named and labelled as
// the kubelet's (label operation_type, values such as "create_container",
// "list_podsandbox", "pull_image", "status", "get_container_events").
const (
	MetricRuntimeOperations         = "kubelet_runtime_operations_total"
	MetricRuntimeOperationsDuration = "kubelet_runtime_operations_duration_seconds"
	MetricRuntimeOperationsErrors   = "kubelet_runtime_operations_errors_total"
)

// InstrumentedCRI is what Instrument returns: both halves of the CRI the
// Manager uses, every call counted and timed. The value also has
// Status(ctx, verbose) exactly when the wrapped RuntimeService has it, and
// GetContainerEvents exactly when the wrapped RuntimeService has it, so that
// type assertions on the result answer as they would on the original.
type InstrumentedCRI interface {
	RuntimeService
	ImageService
	// Unwrap returns the wrapped services, for calls the wrapper does not
	// forward (they are not recorded).
	Unwrap() (RuntimeService, ImageService)
}

// InstrumentConfig configures Instrument.
type InstrumentConfig struct {
	// Runtime and Images are the services to wrap (often the same value,
	// e.g. a *remote.Client or a *fake.Runtime). Both required.
	Runtime RuntimeService
	Images  ImageService
	// Registerer receives the three metric collectors, which belong to this
	// wrapper alone (no package-level state). Required. Registering twice on
	// the same Registerer (two wrappers, or the kubelet's names already
	// taken) is an error wrapping ErrInvalidConfig and the
	// prometheus.AlreadyRegisteredError: one agent, one set of CRI metrics.
	Registerer prometheus.Registerer
	// Clock times the calls (default the real clock).
	Clock clock.PassiveClock
}

// Instrument wraps the CRI services of cfg so that every call increments
// kubelet_runtime_operations_total{operation_type}, observes its duration in
// kubelet_runtime_operations_duration_seconds{operation_type} and, if it
// failed, increments kubelet_runtime_operations_errors_total{operation_type}.
// Results and errors pass through unchanged. It registers the collectors on
// cfg.Registerer and starts nothing.
func Instrument(cfg InstrumentConfig) (InstrumentedCRI, error) {
	if cfg.Runtime == nil {
		return nil, fmt.Errorf("%w: Instrument: Runtime is required", ErrInvalidConfig)
	}
	if cfg.Images == nil {
		return nil, fmt.Errorf("%w: Instrument: Images is required", ErrInvalidConfig)
	}
	if cfg.Registerer == nil {
		return nil, fmt.Errorf("%w: Instrument: Registerer is required", ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	m := &criMetrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRuntimeOperations,
			Help: "Cumulative number of runtime operations by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: MetricRuntimeOperationsDuration,
			Help: "Duration in seconds of runtime operations, by operation type.",
			// The kubelet's buckets: 5ms growing by 2.5x, 14 of them (~3h).
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14),
		}, []string{"operation_type"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRuntimeOperationsErrors,
			Help: "Cumulative number of runtime operation errors by operation type.",
		}, []string{"operation_type"}),
	}
	for i, c := range []prometheus.Collector{m.total, m.duration, m.errors} {
		if err := cfg.Registerer.Register(c); err != nil {
			// Leave the Registerer as it was.
			for _, done := range []prometheus.Collector{m.total, m.duration, m.errors}[:i] {
				cfg.Registerer.Unregister(done)
			}
			return nil, fmt.Errorf("%w: Instrument: Registerer: %w", ErrInvalidConfig, err)
		}
	}
	base := &instrumented{rs: cfg.Runtime, is: cfg.Images, clock: cfg.Clock, m: m}
	st, hasStatus := cfg.Runtime.(statuser)
	ev, hasEvents := cfg.Runtime.(eventStreamer)
	switch {
	case hasStatus && hasEvents:
		return &instrumentedStatusEvents{instrumented: base, st: st, ev: ev}, nil
	case hasStatus:
		return &instrumentedStatus{instrumented: base, st: st}, nil
	case hasEvents:
		return &instrumentedEvents{instrumented: base, ev: ev}, nil
	}
	return base, nil
}

type statuser interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

type eventStreamer interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

type criMetrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
}

// instrumented forwards the CRI calls of RuntimeService and ImageService.
type instrumented struct {
	rs    RuntimeService
	is    ImageService
	clock clock.PassiveClock
	m     *criMetrics
}

func (in *instrumented) Unwrap() (RuntimeService, ImageService) { return in.rs, in.is }

// record counts one call of op that started at start and ended with err.
func (in *instrumented) record(op string, start time.Time, err error) {
	in.m.total.WithLabelValues(op).Inc()
	in.m.duration.WithLabelValues(op).Observe(in.clock.Since(start).Seconds())
	if err != nil {
		in.m.errors.WithLabelValues(op).Inc()
	}
}

func (in *instrumented) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	start := in.clock.Now()
	id, err := in.rs.RunPodSandbox(ctx, config, runtimeHandler)
	in.record("run_podsandbox", start, err)
	return id, err
}

func (in *instrumented) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	start := in.clock.Now()
	err := in.rs.StopPodSandbox(ctx, podSandboxID)
	in.record("stop_podsandbox", start, err)
	return err
}

func (in *instrumented) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	start := in.clock.Now()
	err := in.rs.RemovePodSandbox(ctx, podSandboxID)
	in.record("remove_podsandbox", start, err)
	return err
}

func (in *instrumented) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := in.clock.Now()
	out, err := in.rs.PodSandboxStatus(ctx, podSandboxID, verbose)
	in.record("podsandbox_status", start, err)
	return out, err
}

func (in *instrumented) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := in.clock.Now()
	out, err := in.rs.ListPodSandbox(ctx, filter)
	in.record("list_podsandbox", start, err)
	return out, err
}

func (in *instrumented) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := in.clock.Now()
	id, err := in.rs.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	in.record("create_container", start, err)
	return id, err
}

func (in *instrumented) StartContainer(ctx context.Context, containerID string) error {
	start := in.clock.Now()
	err := in.rs.StartContainer(ctx, containerID)
	in.record("start_container", start, err)
	return err
}

func (in *instrumented) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	start := in.clock.Now()
	err := in.rs.StopContainer(ctx, containerID, timeout)
	in.record("stop_container", start, err)
	return err
}

func (in *instrumented) RemoveContainer(ctx context.Context, containerID string) error {
	start := in.clock.Now()
	err := in.rs.RemoveContainer(ctx, containerID)
	in.record("remove_container", start, err)
	return err
}

func (in *instrumented) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := in.clock.Now()
	out, err := in.rs.ListContainers(ctx, filter)
	in.record("list_containers", start, err)
	return out, err
}

func (in *instrumented) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	start := in.clock.Now()
	out, err := in.rs.ContainerStatus(ctx, containerID, verbose)
	in.record("container_status", start, err)
	return out, err
}

func (in *instrumented) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	start := in.clock.Now()
	stdout, stderr, err := in.rs.ExecSync(ctx, containerID, cmd, timeout)
	in.record("exec_sync", start, err)
	return stdout, stderr, err
}

func (in *instrumented) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	start := in.clock.Now()
	out, err := in.is.ImageStatus(ctx, image, verbose)
	in.record("image_status", start, err)
	return out, err
}

func (in *instrumented) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := in.clock.Now()
	ref, err := in.is.PullImage(ctx, image, auth, podSandboxConfig)
	in.record("pull_image", start, err)
	return ref, err
}

func (in *instrumented) status(ctx context.Context, st statuser, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := in.clock.Now()
	out, err := st.Status(ctx, verbose)
	in.record("status", start, err)
	return out, err
}

// events records one call per stream: its duration is how long the stream
// stayed open; a stream ended by ctx is not an error.
func (in *instrumented) events(ctx context.Context, ev eventStreamer, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	start := in.clock.Now()
	err := ev.GetContainerEvents(ctx, ch, cb)
	rec := err
	if ctx.Err() != nil {
		rec = nil
	}
	in.record("get_container_events", start, rec)
	return err
}

// The wrappers below add the optional calls the wrapped runtime has.

type instrumentedStatus struct {
	*instrumented
	st statuser
}

func (in *instrumentedStatus) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return in.status(ctx, in.st, verbose)
}

type instrumentedEvents struct {
	*instrumented
	ev eventStreamer
}

func (in *instrumentedEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return in.events(ctx, in.ev, ch, cb)
}

type instrumentedStatusEvents struct {
	*instrumented
	st statuser
	ev eventStreamer
}

func (in *instrumentedStatusEvents) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	return in.status(ctx, in.st, verbose)
}

func (in *instrumentedStatusEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, cb func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	return in.events(ctx, in.ev, ch, cb)
}
