package syncloop

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodekit/nodekit/kubetypes"
)

// loopMetrics are the sync loop's metrics; a nil *loopMetrics records
// nothing.
type loopMetrics struct {
	runningPods       prometheus.Gauge
	runningContainers *prometheus.GaugeVec
	configUpdates     *prometheus.CounterVec
	rejections        *prometheus.CounterVec
	plegEvents        *prometheus.CounterVec
	housekeeping      prometheus.Histogram
}

// newLoopMetrics registers the metrics on r (nil: none).
func newLoopMetrics(r prometheus.Registerer) (*loopMetrics, error) {
	if r == nil {
		return nil, nil
	}
	m := &loopMetrics{
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubelet_running_pods",
			Help: "Number of pods that have a running pod sandbox.",
		}),
		runningContainers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kubelet_running_containers",
			Help: "Number of containers currently running, by container state.",
		}, []string{"container_state"}),
		configUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodekit_syncloop_config_updates_total",
			Help: "Pod config updates handled by the sync loop, by source and op.",
		}, []string{"source", "op"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodekit_syncloop_admission_rejections_total",
			Help: "Pods rejected by admission, by reason.",
		}, []string{"reason"}),
		plegEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodekit_syncloop_pleg_events_total",
			Help: "Pod lifecycle events handled by the sync loop, by type.",
		}, []string{"type"}),
		housekeeping: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "nodekit_syncloop_housekeeping_duration_seconds",
			Help:    "Duration in seconds of one housekeeping pass.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	for _, c := range []prometheus.Collector{m.runningPods, m.runningContainers, m.configUpdates, m.rejections, m.plegEvents, m.housekeeping} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *loopMetrics) configUpdate(source string, op kubetypes.Op) {
	if m != nil {
		m.configUpdates.WithLabelValues(source, op.String()).Inc()
	}
}

func (m *loopMetrics) rejected(reason string) {
	if m != nil {
		m.rejections.WithLabelValues(reason).Inc()
	}
}

func (m *loopMetrics) plegEvent(typ kubetypes.EventType) {
	if m == nil {
		return
	}
	switch typ {
	case kubetypes.ContainerStarted, kubetypes.ContainerDied, kubetypes.PodSync, kubetypes.ContainerChanged:
	default:
		typ = "other"
	}
	m.plegEvents.WithLabelValues(string(typ)).Inc()
}

func (m *loopMetrics) housekeepingDone(d time.Duration) {
	if m != nil {
		m.housekeeping.Observe(d.Seconds())
	}
}

// runtimePods sets the running pods and containers gauges from a listing
// of every runtime pod.
func (m *loopMetrics) runtimePods(pods []*kubetypes.Pod) {
	if m == nil {
		return
	}
	running := 0
	states := map[kubetypes.ContainerState]int{
		kubetypes.ContainerStateCreated: 0, kubetypes.ContainerStateRunning: 0,
		kubetypes.ContainerStateExited: 0, kubetypes.ContainerStateUnknown: 0,
	}
	for _, p := range pods {
		for _, sb := range p.Sandboxes {
			if sb.State == kubetypes.ContainerStateRunning {
				running++
				break
			}
		}
		for _, c := range p.Containers {
			states[c.State]++
		}
	}
	m.runningPods.Set(float64(running))
	for s, n := range states {
		m.runningContainers.WithLabelValues(string(s)).Set(float64(n))
	}
}
