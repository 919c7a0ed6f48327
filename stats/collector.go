package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// SummaryProvider is what the resource collector reads; *Provider is one.
type SummaryProvider interface {
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
}

// CollectorConfig configures a ResourceCollector.
type CollectorConfig struct {
	// Context is the parent of every scrape made through Collect (whose
	// prometheus.Collector signature has no context of its own): the
	// context of the server or agent that serves the metrics, so a scrape
	// ends when it stops. Required for Collect; nil makes Collect report
	// a scrape error. CollectContext takes its own.
	Context context.Context
	// Timeout bounds each scrape's Summary (default 10 s).
	Timeout time.Duration
	Logger  *zap.Logger
}

// descs are the kubelet's resource metrics, with its names, labels and
// help text (the stability level prefixed as Kubernetes' metrics framework
// does). scrape_error, deprecated since 1.29, is hidden in 1.36 and left
// out.
type descs struct {
	nodeCPU            *prometheus.Desc
	nodeMemory         *prometheus.Desc
	nodeSwap           *prometheus.Desc
	containerCPU       *prometheus.Desc
	containerMemory    *prometheus.Desc
	containerSwap      *prometheus.Desc
	containerSwapLimit *prometheus.Desc
	podCPU             *prometheus.Desc
	podMemory          *prometheus.Desc
	podSwap            *prometheus.Desc
	scrapeError        *prometheus.Desc
	containerStart     *prometheus.Desc
}

func newDescs() descs {
	return descs{
		nodeCPU: prometheus.NewDesc("node_cpu_usage_seconds_total",
			"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil),
		nodeMemory: prometheus.NewDesc("node_memory_working_set_bytes",
			"[STABLE] Current working set of the node in bytes", nil, nil),
		nodeSwap: prometheus.NewDesc("node_swap_usage_bytes",
			"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil),
		containerCPU: prometheus.NewDesc("container_cpu_usage_seconds_total",
			"[STABLE] Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil),
		containerMemory: prometheus.NewDesc("container_memory_working_set_bytes",
			"[STABLE] Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil),
		containerSwap: prometheus.NewDesc("container_swap_usage_bytes",
			"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems",
			[]string{"container", "pod", "namespace"}, nil),
		containerSwapLimit: prometheus.NewDesc("container_swap_limit_bytes",
			"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems",
			[]string{"container", "pod", "namespace"}, nil),
		podCPU: prometheus.NewDesc("pod_cpu_usage_seconds_total",
			"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil),
		podMemory: prometheus.NewDesc("pod_memory_working_set_bytes",
			"[STABLE] Current working set of the pod in bytes", []string{"pod", "namespace"}, nil),
		podSwap: prometheus.NewDesc("pod_swap_usage_bytes",
			"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", []string{"pod", "namespace"}, nil),
		scrapeError: prometheus.NewDesc("resource_scrape_error",
			"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
		containerStart: prometheus.NewDesc("container_start_time_seconds",
			"[STABLE] Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil),
	}
}

// ResourceCollector is a prometheus.Collector of the kubelet's
// /metrics/resource: at each scrape it takes a CPU-and-memory summary and
// reports the node's, each pod's and each container's cumulative CPU time
// and working set (timestamped with their readings, as the kubelet does),
// swap where the summary has it, the containers' start times, and
// resource_scrape_error (1 when the summary failed). Serve it from a
// registry of its own, as the kubelet does.
type ResourceCollector struct {
	d       descs
	p       SummaryProvider
	base    context.Context // parent of Collect's scrapes
	timeout time.Duration
	log     *zap.Logger
}

var _ prometheus.Collector = (*ResourceCollector)(nil)

// NewResourceCollector returns the collector of p's summaries.
func NewResourceCollector(p SummaryProvider, cfg CollectorConfig) *ResourceCollector {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &ResourceCollector{d: newDescs(), p: p, base: cfg.Context, timeout: cfg.Timeout, log: cfg.Logger.Named("stats.resource")}
}

// Describe sends the descriptors of every metric the collector reports.
func (c *ResourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.d.nodeCPU, c.d.nodeMemory, c.d.nodeSwap, c.d.containerStart, c.d.containerCPU,
		c.d.containerMemory, c.d.containerSwap, c.d.containerSwapLimit, c.d.podCPU, c.d.podMemory, c.d.podSwap, c.d.scrapeError} {
		ch <- d
	}
}

// Collect takes one summary and sends its metrics.
func (c *ResourceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.base == nil {
		c.log.Warn("no summary for the resource metrics: CollectorConfig.Context is not set")
		ch <- prometheus.MustNewConstMetric(c.d.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	c.CollectContext(c.base, ch)
}

// CollectContext is Collect under ctx (bounded by Timeout).
func (c *ResourceCollector) CollectContext(ctx context.Context, ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	s, err := c.p.Summary(ctx, true)
	if err != nil {
		c.log.Warn("no summary for the resource metrics", zap.Error(err))
		ch <- prometheus.MustNewConstMetric(c.d.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	n := s.Node
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		ch <- at(n.CPU.Time.Time, prometheus.MustNewConstMetric(c.d.nodeCPU, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds)))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		ch <- at(n.Memory.Time.Time, prometheus.MustNewConstMetric(c.d.nodeMemory, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes)))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		ch <- at(n.Swap.Time.Time, prometheus.MustNewConstMetric(c.d.nodeSwap, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes)))
	}
	for i := range s.Pods {
		pod := &s.Pods[i]
		name, ns := pod.PodRef.Name, pod.PodRef.Namespace
		for j := range pod.Containers {
			ctr := &pod.Containers[j]
			if ctr.StartTime.Unix() > 0 {
				ch <- prometheus.MustNewConstMetric(c.d.containerStart, prometheus.GaugeValue,
					float64(ctr.StartTime.UnixNano())/float64(time.Second), ctr.Name, name, ns)
			}
			if ctr.CPU != nil && ctr.CPU.UsageCoreNanoSeconds != nil {
				ch <- at(ctr.CPU.Time.Time, prometheus.MustNewConstMetric(c.d.containerCPU, prometheus.CounterValue,
					seconds(*ctr.CPU.UsageCoreNanoSeconds), ctr.Name, name, ns))
			}
			if ctr.Memory != nil && ctr.Memory.WorkingSetBytes != nil {
				ch <- at(ctr.Memory.Time.Time, prometheus.MustNewConstMetric(c.d.containerMemory, prometheus.GaugeValue,
					float64(*ctr.Memory.WorkingSetBytes), ctr.Name, name, ns))
			}
			if sw := ctr.Swap; sw != nil {
				usage := float64(0)
				if sw.SwapUsageBytes != nil {
					usage = float64(*sw.SwapUsageBytes)
					ch <- at(sw.Time.Time, prometheus.MustNewConstMetric(c.d.containerSwap, prometheus.GaugeValue, usage, ctr.Name, name, ns))
				}
				if sw.SwapAvailableBytes != nil {
					ch <- at(sw.Time.Time, prometheus.MustNewConstMetric(c.d.containerSwapLimit, prometheus.GaugeValue,
						float64(*sw.SwapAvailableBytes)+usage, ctr.Name, name, ns))
				}
			}
		}
		if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
			ch <- at(pod.CPU.Time.Time, prometheus.MustNewConstMetric(c.d.podCPU, prometheus.CounterValue, seconds(*pod.CPU.UsageCoreNanoSeconds), name, ns))
		}
		if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
			ch <- at(pod.Memory.Time.Time, prometheus.MustNewConstMetric(c.d.podMemory, prometheus.GaugeValue, float64(*pod.Memory.WorkingSetBytes), name, ns))
		}
		if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
			ch <- at(pod.Swap.Time.Time, prometheus.MustNewConstMetric(c.d.podSwap, prometheus.GaugeValue, float64(*pod.Swap.SwapUsageBytes), name, ns))
		}
	}
	ch <- prometheus.MustNewConstMetric(c.d.scrapeError, prometheus.GaugeValue, 0)
}

func at(t time.Time, m prometheus.Metric) prometheus.Metric {
	return prometheus.NewMetricWithTimestamp(t, m)
}

func seconds(ns uint64) float64 { return float64(ns) / float64(time.Second) }
