package stats

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

type fixedSummary struct {
	s    *statsapi.Summary
	err  error
	only []bool
}

func (f *fixedSummary) Summary(_ context.Context, only bool) (*statsapi.Summary, error) {
	f.only = append(f.only, only)
	return f.s, f.err
}

// The kubelet's resource metrics for a summary: names, labels, help,
// values, and each reading's timestamp (milliseconds) where the kubelet
// sets one.
func TestResourceCollectorOutput(t *testing.T) {
	ts := metav1.NewTime(time.UnixMilli(1767225600123))
	start := metav1.NewTime(time.Unix(1767225000, 500_000_000))
	f := &fixedSummary{s: &statsapi.Summary{
		Node: statsapi.NodeStats{
			CPU:    &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: u64(12_500_000_000)},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u64(1 << 30)},
			Swap:   &statsapi.SwapStats{Time: ts, SwapUsageBytes: u64(4096)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"},
			CPU:    &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: u64(3_000_000_000)},
			Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u64(2 << 20)},
			Containers: []statsapi.ContainerStats{
				{Name: "app", StartTime: start,
					CPU:    &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: u64(2_000_000_000)},
					Memory: &statsapi.MemoryStats{Time: ts, WorkingSetBytes: u64(1 << 20)},
					Swap:   &statsapi.SwapStats{Time: ts, SwapUsageBytes: u64(100), SwapAvailableBytes: u64(900)}},
				// No start time, no memory: only its CPU.
				{Name: "side", CPU: &statsapi.CPUStats{Time: ts, UsageCoreNanoSeconds: u64(1_000_000_000)}},
			},
		}},
	}}
	c := NewResourceCollector(f, CollectorConfig{Context: t.Context()})
	want := `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 1767225600123
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 1 1767225600123
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 1.048576e+06 1767225600123
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.7672250005e+09
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{container="app",namespace="default",pod="web"} 1000 1767225600123
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="default",pod="web"} 100 1767225600123
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 12.5 1767225600123
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.073741824e+09 1767225600123
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 4096 1767225600123
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 1767225600123
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 2.097152e+06 1767225600123
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if len(f.only) == 0 || !f.only[0] {
		t.Errorf("the collector asked for summaries %v, want only CPU and memory", f.only)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func TestResourceCollectorScrapeError(t *testing.T) {
	c := NewResourceCollector(&fixedSummary{err: errors.New("runtime down")}, CollectorConfig{Context: t.Context()})
	want := `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Without a Context, Collect has nothing to bound its scrape by: it
// reports a scrape error rather than asking for a summary.
func TestResourceCollectorWithoutContext(t *testing.T) {
	f := &fixedSummary{err: errors.New("must not be asked")}
	c := NewResourceCollector(f, CollectorConfig{})
	want := `
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// The collector over a Provider on the fake runtime: a registry of its
// own gathers the pod's and container's metrics at the fake clock's time.
func TestResourceCollectorOnFakeRuntime(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"500m", "3Mi"}})
	e.clk.Step(4 * time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewResourceCollector(e.provider(Config{}), CollectorConfig{Context: t.Context()}))
	want := `
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 1767225604000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 3.145728e+06 1767225604000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.7672256e+09
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 2 1767225604000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 3.145728e+06 1767225604000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
