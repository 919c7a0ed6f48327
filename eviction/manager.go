package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Reason is the pod status reason of an evicted or rejected pod.
const Reason = "Evicted"

// Defaults, as the kubelet's.
const (
	DefaultPressureTransitionPeriod = 5 * time.Minute
	DefaultInterval                 = 10 * time.Second
	DefaultMaxPodGracePeriodSeconds = 30
	// HardEvictionGracePeriodSeconds is the grace a pod gets when a hard
	// threshold evicts it.
	HardEvictionGracePeriodSeconds int64 = 1
)

// KillPodFunc stops pod with the Evicted status and a grace period
// override; it returns once the pod is stopped (or it gave up).
type KillPodFunc func(ctx context.Context, pod *v1.Pod, status v1.PodStatus, gracePeriodOverride int64) error

// ImageGC frees disk by deleting unused images.
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) error
}

// ContainerGC frees disk by deleting dead containers.
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// Config configures a Manager.
type Config struct {
	// Thresholds to enforce (ParseThresholds). Empty: the manager never
	// reports pressure (local storage limits are still enforced). As in the
	// kubelet, containerfs thresholds are derived from the nodefs ones (one
	// file system, or images apart with writable layers on nodefs) or the
	// imagefs ones (images and writable layers apart), from the layout the
	// first Summary shows, replacing any given.
	Thresholds []Threshold
	// DisableLocalStorageCapacityIsolation turns off the eviction of pods
	// over their local storage limits (emptyDir sizeLimit, pod and
	// container ephemeral-storage limits), which every cycle checks
	// first, as the kubelet does with localStorageCapacityIsolation (on by
	// default).
	DisableLocalStorageCapacityIsolation bool
	// EnforceAllocatable adds an allocatableMemory.available hard
	// threshold for each hard memory.available one
	// (WithAllocatableThresholds), as the kubelet does when node
	// allocatable is enforced on pods. Set it when the pods cgroup is
	// limited to the node's allocatable memory; the Builder
	// (nodekit.WithEviction) sets it from the container manager.
	EnforceAllocatable bool
	// Notifiers wake Run for a cycle at once when memory may have crossed
	// a threshold (a memcg threshold notifier); each is re-armed with
	// UpdateThreshold after every cycle that observed memory.
	Notifiers []ThresholdNotifier
	// Stats is required.
	Stats StatsProvider
	// ActivePods lists the pods that may be evicted; required.
	ActivePods func() []*v1.Pod
	// KillPod is required.
	KillPod KillPodFunc
	// ImageGC and ContainerGC reclaim disk before any pod is evicted for
	// disk pressure; nil skips that step.
	ImageGC     ImageGC
	ContainerGC ContainerGC
	// PressureTransitionPeriod holds a pressure condition after its
	// threshold was last met (default 5m).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds caps a pod's grace under a soft threshold
	// (default 30).
	MaxPodGracePeriodSeconds int64
	// Interval between cycles in Run (default 10s).
	Interval time.Duration
	// Recorder records the kubelet's eviction events: EvictionThresholdMet
	// on the node (NodeName) when a threshold makes the manager reclaim,
	// Evicted (the message naming the resource and usage) on each evicted
	// pod. Nil records none.
	Recorder kubetypes.EventRecorder
	// NodeName names the node of EvictionThresholdMet.
	NodeName   string
	Clock      clock.Clock
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Manager decides when the node is under pressure and which pod to evict.
type Manager struct {
	cfg       Config
	log       *zap.Logger
	evictions *prometheus.CounterVec
	once      lifecycle.Once
	trigger   chan struct{} // one pending extra cycle

	syncMu sync.Mutex // one cycle at a time

	mu                   sync.RWMutex
	thresholds           []Threshold // cfg.Thresholds, containerfs derived once the layout is known
	fsLayoutKnown        bool
	conditions           []v1.NodeConditionType
	thresholdsMet        []Threshold
	firstObservedAt      map[string]firstSeen
	conditionLastSeen    map[v1.NodeConditionType]time.Time
	lastObservationTimes map[Signal]time.Time
}

type firstSeen struct {
	t  Threshold
	at time.Time
}

// New validates cfg, fills defaults and returns a Manager. It starts
// nothing.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.Stats == nil {
		errs = append(errs, fmt.Errorf("%w: Stats is nil", ErrInvalidConfig))
	}
	if cfg.ActivePods == nil {
		errs = append(errs, fmt.Errorf("%w: ActivePods is nil", ErrInvalidConfig))
	}
	if cfg.KillPod == nil {
		errs = append(errs, fmt.Errorf("%w: KillPod is nil", ErrInvalidConfig))
	}
	for i, n := range cfg.Notifiers {
		if n == nil {
			errs = append(errs, fmt.Errorf("%w: Notifiers[%d] is nil", ErrInvalidConfig, i))
		}
	}
	for i, t := range cfg.Thresholds {
		if !t.Signal.Valid() || (t.Value.Quantity == nil && (t.Value.Percentage <= 0 || t.Value.Percentage > 1)) || t.GracePeriod < 0 {
			errs = append(errs, fmt.Errorf("%w: Thresholds[%d] (%s) is invalid", ErrInvalidConfig, i, t.Signal))
		}
	}
	if cfg.PressureTransitionPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: PressureTransitionPeriod is negative", ErrInvalidConfig))
	}
	if cfg.MaxPodGracePeriodSeconds < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxPodGracePeriodSeconds is negative", ErrInvalidConfig))
	}
	if cfg.Interval < 0 {
		errs = append(errs, fmt.Errorf("%w: Interval is negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.PressureTransitionPeriod == 0 {
		cfg.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if cfg.MaxPodGracePeriodSeconds == 0 {
		cfg.MaxPodGracePeriodSeconds = DefaultMaxPodGracePeriodSeconds
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Thresholds = slices.Clone(cfg.Thresholds)
	if cfg.EnforceAllocatable {
		cfg.Thresholds = WithAllocatableThresholds(cfg.Thresholds)
	}
	cfg.Notifiers = slices.Clone(cfg.Notifiers)
	m := &Manager{
		cfg:                  cfg,
		thresholds:           cfg.Thresholds,
		log:                  cfg.Logger.Named("eviction"),
		firstObservedAt:      map[string]firstSeen{},
		conditionLastSeen:    map[v1.NodeConditionType]time.Time{},
		lastObservationTimes: map[Signal]time.Time{},
		trigger:              make(chan struct{}, 1),
	}
	if cfg.Registerer != nil {
		m.evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_evictions",
			Help: "Cumulative number of pod evictions by eviction signal.",
		}, []string{"eviction_signal"})
		if err := cfg.Registerer.Register(m.evictions); err != nil {
			return nil, fmt.Errorf("%w: Registerer: %v", ErrInvalidConfig, err)
		}
	}
	return m, nil
}

// observation is one signal's available amount and capacity.
type observation struct {
	available, capacity int64
	time                time.Time
}

func observe(s *Summary) map[Signal]observation {
	obs := make(map[Signal]observation, 9)
	if s.Memory != nil {
		a := int64(s.Memory.AvailableBytes)
		obs[SignalMemoryAvailable] = observation{a, a + int64(s.Memory.WorkingSetBytes), s.Time}
	}
	if s.AllocatableMemory != nil {
		a := int64(s.AllocatableMemory.AvailableBytes)
		obs[SignalAllocatableMemoryAvailable] = observation{a, a + int64(s.AllocatableMemory.WorkingSetBytes), s.Time}
	}
	fs := func(f *FsStats, avail, inodes Signal) {
		if f == nil {
			return
		}
		obs[avail] = observation{int64(f.AvailableBytes), int64(f.CapacityBytes), s.Time}
		obs[inodes] = observation{int64(f.InodesFree), int64(f.Inodes), s.Time}
	}
	image := s.ImageFs
	if image == nil {
		image = s.NodeFs
	}
	container := s.ContainerFs
	if container == nil {
		container = image
	}
	fs(s.NodeFs, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	fs(image, SignalImageFsAvailable, SignalImageFsInodesFree)
	fs(container, SignalContainerFsAvailable, SignalContainerFsInodesFree)
	if s.PID != nil {
		obs[SignalPIDAvailable] = observation{int64(s.PID.MaxPID) - int64(s.PID.NumProcesses), int64(s.PID.MaxPID), s.Time}
	}
	return obs
}

// met returns the thresholds whose signal's available amount is below the
// threshold (strictly); with minReclaim, below threshold plus min reclaim.
func met(ts []Threshold, obs map[Signal]observation, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.QuantityOf(o.capacity)
		if minReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.QuantityOf(o.capacity)
		}
		if q > o.available {
			out = append(out, t)
		}
	}
	return out
}

func mergeThresholds(a, b []Threshold) []Threshold {
	out := slices.Clone(a)
	for _, t := range b {
		if !slices.ContainsFunc(out, func(x Threshold) bool { return x.key() == t.key() }) {
			out = append(out, t)
		}
	}
	return out
}

// conditionOrder is the order conditions are reported in.
func conditionOrder() []v1.NodeConditionType {
	return []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}
}

// SyncOnce runs one cycle: it observes the node, updates the pressure
// conditions, and when a threshold has been met for its grace period first
// tries node-level reclaim (disk) and then evicts at most one pod. It
// returns the pod it evicted (a kill error still counts as the cycle's
// eviction and is logged).
func (m *Manager) SyncOnce(ctx context.Context) ([]*v1.Pod, error) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	if len(m.cfg.Thresholds) == 0 && m.cfg.DisableLocalStorageCapacityIsolation {
		return nil, nil
	}
	active := m.cfg.ActivePods()
	summary, err := m.cfg.Stats.Summary(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStats, err)
	}
	if summary == nil {
		return nil, fmt.Errorf("%w: nil summary", ErrStats)
	}
	if summary.Memory != nil || summary.AllocatableMemory != nil {
		for i, n := range m.cfg.Notifiers {
			if err := n.UpdateThreshold(summary); err != nil {
				m.log.Warn("re-arming a threshold notifier failed", zap.Int("notifier", i), zap.Error(err))
			}
		}
	}
	obs := observe(summary)
	now := m.cfg.Clock.Now()

	m.mu.Lock()
	if !m.fsLayoutKnown {
		m.fsLayoutKnown = true
		var err error
		m.thresholds, err = UpdateContainerFsThresholds(m.cfg.Thresholds, summary.ImageFs != nil, summary.ContainerFs != nil)
		if err != nil {
			m.log.Warn("containerfs thresholds given are replaced by derived ones", zap.Error(err))
		}
	}
	all := m.thresholds
	thresholds := met(all, obs, false)
	if len(m.thresholdsMet) > 0 {
		thresholds = mergeThresholds(thresholds, met(m.thresholdsMet, obs, true))
	}
	first := make(map[string]firstSeen, len(thresholds))
	for _, t := range thresholds {
		at := now
		if prev, ok := m.firstObservedAt[t.key()]; ok {
			at = prev.at
		}
		first[t.key()] = firstSeen{t, at}
	}
	for _, t := range thresholds {
		m.conditionLastSeen[signalCondition(t.Signal)] = now
	}
	var conds []v1.NodeConditionType
	for _, c := range conditionOrder() {
		if at, ok := m.conditionLastSeen[c]; ok {
			if now.Sub(at) < m.cfg.PressureTransitionPeriod {
				conds = append(conds, c)
			} else {
				delete(m.conditionLastSeen, c)
			}
		}
	}
	var graceMet []Threshold
	for _, t := range thresholds { // in the order met, not map order
		if now.Sub(first[t.key()].at) >= t.GracePeriod {
			graceMet = append(graceMet, t)
		}
	}
	m.conditions = conds
	m.firstObservedAt = first
	m.thresholdsMet = graceMet
	var fresh []Threshold
	for _, t := range graceMet {
		o := obs[t.Signal]
		last, seen := m.lastObservationTimes[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(last) {
			fresh = append(fresh, t)
		}
	}
	for s, o := range obs {
		m.lastObservationTimes[s] = o.time
	}
	m.mu.Unlock()

	stats := make(map[types.UID]*PodStats, len(summary.Pods))
	for i := range summary.Pods {
		stats[summary.Pods[i].UID] = &summary.Pods[i]
	}
	dedicated := summary.ImageFs != nil
	if !m.cfg.DisableLocalStorageCapacityIsolation {
		if evicted := m.localStorageEviction(ctx, active, stats, dedicated); len(evicted) > 0 {
			return evicted, nil
		}
	}
	if len(fresh) == 0 {
		return nil, nil
	}
	// Memory first, then in Signals order.
	slices.SortStableFunc(fresh, func(a, b Threshold) int { return signalRank(a.Signal) - signalRank(b.Signal) })
	t := fresh[0]
	res := signalResource(t.Signal)
	m.log.Info("attempting to reclaim", zap.String("resource", string(res)), zap.Stringer("threshold", t))
	m.rec().Eventf(kubetypes.NodeRef(m.cfg.NodeName), v1.EventTypeWarning, kubetypes.ReasonEvictionThresholdMet, "Attempting to reclaim %s", res)

	if m.reclaimNodeLevel(ctx, t.Signal, all, dedicated) {
		m.log.Info("node-level reclaim relieved the pressure; no eviction", zap.String("resource", string(res)))
		return nil, nil
	}
	if len(active) == 0 {
		m.log.Warn("threshold met but no pods are active to evict", zap.Stringer("threshold", t))
		return nil, nil
	}
	pods := slices.Clone(active)
	rank(pods, t.Signal, stats, dedicated)
	for _, pod := range pods {
		if kubetypes.IsCriticalPod(pod) {
			m.log.Info("cannot evict a critical pod", zap.String("pod", pod.Namespace+"/"+pod.Name))
			continue
		}
		grace := HardEvictionGracePeriodSeconds
		if !t.IsHard() {
			grace = m.cfg.MaxPodGracePeriodSeconds
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(grace, *pod.Spec.TerminationGracePeriodSeconds)
			}
		}
		msg := evictionMessage(res, pod, stats[pod.UID], fresh, obs)
		status := m.evictedStatus(pod, msg)
		m.log.Info("evicting pod", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Int64("grace", grace), zap.String("message", msg))
		m.rec().Event(pod, v1.EventTypeWarning, kubetypes.ReasonEvicted, msg)
		if err := m.cfg.KillPod(ctx, pod, status, grace); err != nil {
			m.log.Error("pod failed to evict", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
		}
		if m.evictions != nil {
			m.evictions.WithLabelValues(string(t.Signal)).Inc()
		}
		return []*v1.Pod{pod}, nil
	}
	m.log.Warn("unable to evict any pod")
	return nil, nil
}

// reclaimNodeLevel runs the disk GC functions for signal and re-measures;
// true means no threshold is met any more (min reclaim included).
func (m *Manager) reclaimNodeLevel(ctx context.Context, signal Signal, thresholds []Threshold, dedicatedImageFs bool) bool {
	var funcs []func(context.Context) error
	cgc := func() {
		if m.cfg.ContainerGC != nil {
			funcs = append(funcs, m.cfg.ContainerGC.DeleteAllUnusedContainers)
		}
	}
	igc := func() {
		if m.cfg.ImageGC != nil {
			funcs = append(funcs, m.cfg.ImageGC.DeleteUnusedImages)
		}
	}
	switch signalResource(signal) {
	case v1.ResourceEphemeralStorage, resourceInodes:
		// With a dedicated image fs, nodefs pressure is logs and volumes:
		// no GC frees it.
		if !dedicatedImageFs || (signal != SignalNodeFsAvailable && signal != SignalNodeFsInodesFree) {
			cgc()
			igc()
		}
	}
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			m.log.Info("node-level reclaim failed", zap.String("signal", string(signal)), zap.Error(err))
		}
	}
	summary, err := m.cfg.Stats.Summary(ctx)
	if err != nil || summary == nil {
		m.log.Error("stats after node-level reclaim", zap.Error(err))
		return false
	}
	return len(met(thresholds, observe(summary), true)) == 0
}

func (m *Manager) evictedStatus(pod *v1.Pod, msg string) v1.PodStatus {
	return v1.PodStatus{
		Phase:   v1.PodFailed,
		Reason:  Reason,
		Message: msg,
		Conditions: []v1.PodCondition{{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            msg,
			LastTransitionTime: metav1.NewTime(m.cfg.Clock.Now()),
		}},
	}
}

func formatAmount(n int64, res v1.ResourceName) string {
	if res == v1.ResourceMemory || res == v1.ResourceEphemeralStorage {
		return binary(n)
	}
	return resource.NewQuantity(n, resource.DecimalSI).String()
}

// evictionMessage says why pod is evicted, as the kubelet words it.
func evictionMessage(res v1.ResourceName, pod *v1.Pod, st *PodStats, ts []Threshold, obs map[Signal]observation) string {
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	for _, t := range ts {
		if signalResource(t.Signal) != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			q := formatAmount(t.Value.QuantityOf(o.capacity), res)
			if t.Value.Quantity != nil {
				q = t.Value.Quantity.String()
			}
			msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ", q, formatAmount(o.available, res))
			break
		}
	}
	if st == nil || (res != v1.ResourceMemory && res != v1.ResourceEphemeralStorage) {
		return msg
	}
	containers := append(slices.Clone(pod.Spec.Containers), pod.Spec.InitContainers...)
	for _, cs := range st.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[res]
			use := int64(cs.MemoryWorkingSetBytes)
			if res == v1.ResourceEphemeralStorage {
				use = int64(cs.RootfsBytes + cs.LogsBytes)
			}
			if use > req.Value() {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, binary(use), req.String(), res)
			}
			break
		}
	}
	return msg
}

// Run calls SyncOnce at once, then every Interval and whenever Trigger is
// called or a notifier reports a crossing, until ctx is done. It starts
// each of Config.Notifiers' Run and returns nil once they and the
// loop have exited. Cycle and notifier errors are logged. Triggers are
// coalesced: any number of them while a cycle runs give one more cycle.
// Notifiers only speed cycles up: one whose Run returns early is logged and
// the cycles go on every Interval (the kubelet's behaviour, and the one
// exception to the lifecycle rule that a child's early return fails its
// parent). See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, n := range m.cfg.Notifiers {
		wg.Go(func() {
			if err := n.Run(ctx, m.Trigger); err != nil && ctx.Err() == nil {
				m.log.Error("threshold notifier stopped; cycles continue every interval", zap.Int("notifier", i), zap.Error(err))
			}
		})
	}
	for {
		select { // a trigger pending now is served by this cycle
		case <-m.trigger:
		default:
		}
		if _, err := m.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("eviction cycle failed", zap.Error(err))
		}
		t := m.cfg.Clock.NewTimer(m.cfg.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-m.trigger:
			t.Stop()
			m.log.Debug("cycle triggered")
		}
	}
}

// Trigger asks Run for a cycle now. It never blocks; triggers that come
// before that cycle starts are merged into it. Without Run it does nothing
// until Run starts (whose first cycle is immediate anyway).
func (m *Manager) Trigger() {
	select {
	case m.trigger <- struct{}{}:
	default:
	}
}

// Thresholds returns the thresholds enforced (with any derived
// allocatableMemory.available ones).
func (m *Manager) Thresholds() []Threshold {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.thresholds)
}

// NodeConditions returns the pressure conditions now reported (held for
// the transition period), in the order MemoryPressure, DiskPressure,
// PIDPressure.
func (m *Manager) NodeConditions() []v1.NodeConditionType {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Clone(m.conditions)
}

func (m *Manager) has(c v1.NodeConditionType) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return slices.Contains(m.conditions, c)
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *Manager) IsUnderMemoryPressure() bool { return m.has(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *Manager) IsUnderDiskPressure() bool { return m.has(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *Manager) IsUnderPIDPressure() bool { return m.has(v1.NodePIDPressure) }

// Admit decides whether pod may start: with no pressure, or for a critical
// pod, yes; under memory pressure alone, yes unless the pod is BestEffort
// and does not tolerate node.kubernetes.io/memory-pressure:NoSchedule;
// under any other pressure, no. A rejection has reason "Evicted". active is
// accepted for the admission-handler shape and not consulted.
func (m *Manager) Admit(pod *v1.Pod, active []*v1.Pod) (ok bool, reason, message string) {
	_ = active
	if pod == nil {
		return false, Reason, "no pod"
	}
	conds := m.NodeConditions()
	if len(conds) == 0 || kubetypes.IsCriticalPod(pod) {
		return true, "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if !isBestEffort(pod) || tolerates(pod, v1.TaintNodeMemoryPressure, v1.TaintEffectNoSchedule) {
			return true, "", ""
		}
	}
	return false, Reason, fmt.Sprintf("The node had condition: %v. ", conds)
}

// rec is the configured recorder, or one that records nothing.
func (m *Manager) rec() kubetypes.EventRecorder { return kubetypes.RecorderOrNop(m.cfg.Recorder) }
