package kuberuntime_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// slowCRI is a RuntimeService + ImageService whose calls take a fixed time
// on a fake clock and fail when told to. It has neither Status nor
// GetContainerEvents.
type slowCRI struct {
	kuberuntime.RuntimeService // nil: only the methods below are called
	clk                        *clocktesting.FakeClock
	took                       time.Duration
	err                        error
}

func (s *slowCRI) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	s.clk.Step(s.took)
	if s.err != nil {
		return nil, s.err
	}
	return []*runtimeapi.PodSandbox{{Id: "sb1"}}, nil
}

func (s *slowCRI) StartContainer(_ context.Context, id string) error {
	s.clk.Step(s.took)
	return s.err
}

func (s *slowCRI) ImageStatus(context.Context, *runtimeapi.ImageSpec, bool) (*runtimeapi.ImageStatusResponse, error) {
	s.clk.Step(s.took)
	return &runtimeapi.ImageStatusResponse{}, s.err
}

func (s *slowCRI) PullImage(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	s.clk.Step(s.took)
	return "sha256:x", s.err
}

func histogram(t *testing.T, reg *prometheus.Registry, op string) *dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != kuberuntime.MetricRuntimeOperationsDuration {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" && l.GetValue() == op {
					return m.GetHistogram()
				}
			}
		}
	}
	return nil
}

func TestInstrumentRecordsCallsErrorsAndDurations(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	inner := &slowCRI{clk: clk, took: 2 * time.Second}
	reg := prometheus.NewRegistry()
	cri, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: inner, Images: inner, Registerer: reg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	sbs, err := cri.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 || sbs[0].Id != "sb1" {
		t.Fatalf("ListPodSandbox = %v, %v; want the wrapped result", sbs, err)
	}
	if _, err := cri.ListPodSandbox(ctx, nil); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	inner.err, inner.took = boom, 100*time.Millisecond
	if err := cri.StartContainer(ctx, "c1"); !errors.Is(err, boom) {
		t.Fatalf("StartContainer error = %v; want the wrapped error unchanged", err)
	}
	if ref, err := cri.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil); ref != "sha256:x" || !errors.Is(err, boom) {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}

	checks := []struct {
		name, op string
		want     float64
	}{
		{kuberuntime.MetricRuntimeOperations, "list_podsandbox", 2},
		{kuberuntime.MetricRuntimeOperations, "start_container", 1},
		{kuberuntime.MetricRuntimeOperations, "pull_image", 1},
		{kuberuntime.MetricRuntimeOperationsErrors, "start_container", 1},
		{kuberuntime.MetricRuntimeOperationsErrors, "pull_image", 1},
	}
	for _, c := range checks {
		got := counterValue(t, reg, c.name, c.op)
		if got != c.want {
			t.Errorf("%s{operation_type=%q} = %v; want %v", c.name, c.op, got, c.want)
		}
	}
	// No error series for an operation that never failed.
	if n := testutil.CollectAndCount(reg, kuberuntime.MetricRuntimeOperationsErrors); n != 2 {
		t.Errorf("%s has %d series; want 2 (start_container, pull_image)", kuberuntime.MetricRuntimeOperationsErrors, n)
	}

	h := histogram(t, reg, "list_podsandbox")
	if h == nil || h.GetSampleCount() != 2 || h.GetSampleSum() != 4 {
		t.Fatalf("list_podsandbox histogram = %v; want 2 samples summing to 4s", h)
	}
	h = histogram(t, reg, "start_container")
	if h == nil || h.GetSampleCount() != 1 || h.GetSampleSum() != 0.1 {
		t.Fatalf("start_container histogram = %v; want 1 sample of 0.1s", h)
	}
	// The kubelet's buckets: 5ms growing by 2.5x, 14 buckets.
	if b := h.GetBucket(); len(b) != 14 || b[0].GetUpperBound() != 0.005 {
		t.Errorf("buckets = %v; want 14 from 0.005", b)
	}
}

// counterValue returns the counter name{operation_type=op} of reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation_type" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{operation_type=%q}", name, op)
	return 0
}

func TestInstrumentOptionalMethodsFollowTheWrappedRuntime(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	inner := &slowCRI{clk: clk}
	plain, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: inner, Images: inner, Registerer: prometheus.NewRegistry(), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := plain.(interface {
		Status(context.Context, bool) (*runtimeapi.StatusResponse, error)
	}); ok {
		t.Error("a runtime without Status gained one: the agent would call it and see the runtime down")
	}
	if _, ok := plain.(interface {
		GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
	}); ok {
		t.Error("a runtime without GetContainerEvents gained one")
	}
	if rs, is := plain.Unwrap(); rs != inner || is != inner {
		t.Error("Unwrap does not return the wrapped services")
	}

	f, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	full, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: f, Images: f, Registerer: reg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	st, ok := full.(interface {
		Status(context.Context, bool) (*runtimeapi.StatusResponse, error)
	})
	if !ok {
		t.Fatal("the fake runtime's Status is not passed through")
	}
	f.SetNetworkReady(false)
	resp, err := st.Status(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	var netReady *runtimeapi.RuntimeCondition
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.NetworkReady {
			netReady = c
		}
	}
	if netReady == nil || netReady.GetStatus() {
		t.Errorf("Status did not reach the fake: NetworkReady = %v", netReady)
	}
	ev, ok := full.(interface {
		GetContainerEvents(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
	})
	if !ok {
		t.Fatal("the fake runtime's GetContainerEvents is not passed through")
	}
	// A stream ended by its context counts as a call, not an error.
	ctx, cancel := context.WithCancel(t.Context())
	established := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ev.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse, 1), func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
	}()
	select {
	case <-established:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream was not established")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream did not end with its context")
	}
	if got := counterValue(t, reg, kuberuntime.MetricRuntimeOperations, "get_container_events"); got != 1 {
		t.Errorf("get_container_events calls = %v; want 1", got)
	}
	if got := counterValue(t, reg, kuberuntime.MetricRuntimeOperations, "status"); got != 1 {
		t.Errorf("status calls = %v; want 1", got)
	}
	if n := testutil.CollectAndCount(reg, kuberuntime.MetricRuntimeOperationsErrors); n != 0 {
		t.Errorf("%d error series; want none", n)
	}
}

func TestInstrumentConfigErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	inner := &slowCRI{clk: clk}
	reg := prometheus.NewRegistry()
	for name, cfg := range map[string]kuberuntime.InstrumentConfig{
		"Runtime":    {Images: inner, Registerer: reg},
		"Images":     {Runtime: inner, Registerer: reg},
		"Registerer": {Runtime: inner, Images: inner},
	} {
		_, err := kuberuntime.Instrument(cfg)
		if !errors.Is(err, kuberuntime.ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: err = %v; want ErrInvalidConfig naming it", name, err)
		}
	}
}

func TestInstrumentTwiceOnOneRegistererFails(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	inner := &slowCRI{clk: clk}
	reg := prometheus.NewRegistry()
	if _, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: inner, Images: inner, Registerer: reg, Clock: clk}); err != nil {
		t.Fatal(err)
	}
	_, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: inner, Images: inner, Registerer: reg, Clock: clk})
	var are prometheus.AlreadyRegisteredError
	if !errors.Is(err, kuberuntime.ErrInvalidConfig) || !errors.As(err, &are) {
		t.Fatalf("second Instrument on one registry: err = %v; want ErrInvalidConfig and AlreadyRegisteredError", err)
	}

	// A failure on the last collector undoes the first two.
	fr := &failingRegisterer{Registerer: prometheus.NewRegistry(), failAt: 3}
	if _, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: inner, Images: inner, Registerer: fr, Clock: clk}); !errors.Is(err, kuberuntime.ErrInvalidConfig) {
		t.Fatalf("err = %v; want ErrInvalidConfig", err)
	}
	if fr.registered != 2 || fr.unregistered != 2 {
		t.Errorf("registered %d, unregistered %d; want 2 and 2", fr.registered, fr.unregistered)
	}
}

// failingRegisterer fails the failAt-th Register call.
type failingRegisterer struct {
	prometheus.Registerer
	failAt, calls, registered, unregistered int
}

func (f *failingRegisterer) Register(c prometheus.Collector) error {
	f.calls++
	if f.calls == f.failAt {
		return errors.New("injected registration failure")
	}
	if err := f.Registerer.Register(c); err != nil {
		return err
	}
	f.registered++
	return nil
}

func (f *failingRegisterer) Unregister(c prometheus.Collector) bool {
	if f.Registerer.Unregister(c) {
		f.unregistered++
		return true
	}
	return false
}

func ExampleInstrument() {
	f, err := fake.New(fake.Config{Images: []string{"busybox"}})
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	cri, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: f, Images: f, Registerer: reg})
	if err != nil {
		panic(err)
	}
	// Give cri to kuberuntime.New (Runtime and Images) in place of f.
	ctx := context.Background()
	_, _ = cri.ListPodSandbox(ctx, nil)
	_, _ = cri.ListPodSandbox(ctx, nil)
	_ = cri.StartContainer(ctx, "no-such-container")

	fmt.Println(testutil.CollectAndCount(reg, kuberuntime.MetricRuntimeOperations), "operation types")
	fmt.Println(testutil.CollectAndCount(reg, kuberuntime.MetricRuntimeOperationsErrors), "with errors")
	// Output:
	// 2 operation types
	// 1 with errors
}
