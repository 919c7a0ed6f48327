package nodekit_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
)

// families gathers reg into a map by family name.
func families(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// series returns the metric of mf whose labels include every name=value
// pair of labels, or nil.
func series(mf *dto.MetricFamily, labels ...string) *dto.Metric {
	if mf == nil {
		return nil
	}
next:
	for _, m := range mf.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// value is a counter's or gauge's value, a histogram's sample count, or -1
// when the series is missing.
func value(mf *dto.MetricFamily, labels ...string) float64 {
	m := series(mf, labels...)
	switch {
	case m == nil:
		return -1
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetCounter().GetValue()
	}
}

// TestAgentMetrics runs two static pods on the fake runtime with a
// Registerer and checks that every metric family the agent promises is
// registered through the Builder and carries sensible values.
func TestAgentMetrics(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	writeManifests(t, dir, "a", "b")
	sink := agenttest.NewNameSink()
	reg := prometheus.NewRegistry()
	agent, err := nodekit.NewBuilder().
		WithNodeName("node1").
		WithFakeRuntime("busybox:1").
		WithManifestDir(dir).
		WithRootDir(t.TempDir()).
		WithStatusSink(sink).
		WithRegisterer(reg).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	// The first listing of sandboxes fails: an error the CRI metrics count.
	agent.FakeRuntime().InjectError("ListPodSandbox", errors.New("injected"), 1)

	stop := agenttest.StartAgent(t, agent)
	agenttest.WaitUntil(t, 20*time.Second, sink.Changed(), "2 pods Running", func() (bool, string) {
		ph := sink.Phases()
		return ph["a-node1"] == v1.PodRunning && ph["b-node1"] == v1.PodRunning, fmt.Sprint(ph)
	})
	// The running gauges are set by housekeeping (every 2s once the sources
	// are ready) and the relist interval needs two relists (1s apart).
	agenttest.WaitUntil(t, 20*time.Second, nil, "running gauges and relist interval", func() (bool, string) {
		f := families(t, reg)
		pods := value(f["kubelet_running_pods"])
		interval := value(f["kubelet_pleg_relist_interval_seconds"])
		return pods == 2 && interval >= 1, fmt.Sprintf("running pods %v, relist intervals %v", pods, interval)
	})
	// CRI errors while the agent runs: only the injected one. (After the
	// stop a call cut short by it counts as failed too, as the kubelet's
	// would, so they are read before.)
	running := families(t, reg)
	if v := value(running["kubelet_runtime_operations_errors_total"], "operation_type", "list_podsandbox"); v != 1 {
		t.Errorf("kubelet_runtime_operations_errors_total[operation_type list_podsandbox] = %v while running; want 1 (the injected failure)", v)
	}
	for _, m := range running["kubelet_runtime_operations_errors_total"].GetMetric() {
		if op := m.GetLabel()[0].GetValue(); op != "list_podsandbox" {
			t.Errorf("unexpected CRI errors while running: %s = %v", op, m.GetCounter().GetValue())
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	f := families(t, reg)
	checks := []struct {
		family string
		labels []string
		ok     func(v float64) bool
		want   string
	}{
		// PLEG.
		{"kubelet_pleg_relist_duration_seconds", nil, atLeast(2), ">= 2 relists"},
		{"kubelet_pleg_relist_interval_seconds", nil, atLeast(1), ">= 1 interval"},
		// Pod workers: each pod created once.
		{"kubelet_pod_worker_duration_seconds", []string{"operation_type", "create"}, equal(2), "2 creates"},
		// Running pods and containers.
		{"kubelet_running_pods", nil, equal(2), "2"},
		{"kubelet_running_containers", []string{"container_state", "running"}, equal(2), "2"},
		{"kubelet_running_containers", []string{"container_state", "exited"}, equal(0), "0"},
		// Config updates, by source and op, in the sync loop and in podconfig.
		{"nodekit_syncloop_config_updates_total", []string{"source", "file", "op", "ADD"}, atLeast(1), ">= 1 ADD from file"},
		{"nodekit_podconfig_updates_delivered_total", []string{"op", "ADD"}, atLeast(1), ">= 1 ADD"},
		{"nodekit_podconfig_pods", []string{"source", "file"}, equal(2), "2"},
		// CRI operations: one sandbox and one container per pod.
		{"kubelet_runtime_operations_total", []string{"operation_type", "run_podsandbox"}, equal(2), "2"},
		{"kubelet_runtime_operations_total", []string{"operation_type", "create_container"}, equal(2), "2"},
		{"kubelet_runtime_operations_total", []string{"operation_type", "start_container"}, equal(2), "2"},
		{"kubelet_runtime_operations_total", []string{"operation_type", "list_podsandbox"}, atLeast(3), ">= 3"},
		{"kubelet_runtime_operations_total", []string{"operation_type", "status"}, atLeast(1), ">= 1 runtime health check"},
		{"kubelet_runtime_operations_duration_seconds", []string{"operation_type", "run_podsandbox"}, equal(2), "2 samples"},
		{"kubelet_runtime_operations_errors_total", []string{"operation_type", "list_podsandbox"}, atLeast(1), ">= 1 (the injected failure; the stop may cut a call short)"},
	}
	for _, c := range checks {
		mf, ok := f[c.family]
		if !ok {
			t.Errorf("metric family %s is not registered (or has no series)", c.family)
			continue
		}
		if v := value(mf, c.labels...); !c.ok(v) {
			t.Errorf("%s%v = %v; want %s", c.family, c.labels, v, c.want)
		}
	}
	// Durations are real: the relist histogram's sum is positive and small.
	if h := series(f["kubelet_pleg_relist_duration_seconds"]).GetHistogram(); h.GetSampleSum() <= 0 || h.GetSampleSum() > 10 {
		t.Errorf("relist durations sum to %vs", h.GetSampleSum())
	}
	if t.Failed() {
		var names []string
		for n := range f {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("families: %s", strings.Join(names, " "))
	}
}

// TestRegistererServesOneAgent: a second agent on the same Registerer is
// refused at Build (the CRI metrics among the reasons), not half-registered.
func TestRegistererServesOneAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	reg := prometheus.NewRegistry()
	build := func() error {
		_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).WithRegisterer(reg).Build()
		return err
	}
	if err := build(); err != nil {
		t.Fatal(err)
	}
	err := build()
	var are prometheus.AlreadyRegisteredError
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !errors.As(err, &are) || !strings.Contains(err.Error(), "runtime metrics") {
		t.Fatalf("second Build on one Registerer: %v; want ErrInvalidConfig naming the runtime metrics", err)
	}
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func equal(n float64) func(float64) bool   { return func(v float64) bool { return v == n } }
