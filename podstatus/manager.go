package podstatus

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Errors of the status manager.
var (
	// ErrInvalidConfig: a Config field is invalid (the error names it).
	ErrInvalidConfig = errors.New("podstatus: invalid status manager config")
	// ErrSink: the sink refused a status or a deletion (wrapped with
	// the pod and the sink's own error).
	ErrSink = errors.New("podstatus: status sink failed")
	// ErrNoPod: a nil pod was given.
	ErrNoPod = errors.New("podstatus: no pod")
	// ErrAlreadyRan: Run was called before on this Manager (concurrently or
	// after it returned); the same value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)

// DefaultSyncPeriod is how often the Manager offers every
// pending status to its sink even when nothing changed.
const DefaultSyncPeriod = 10 * time.Second

// maxTerminationMessage is the total size of the termination messages
// a pod status may carry (split evenly between its containers).
const maxTerminationMessage = 12 * 1024

// ContainerActivity tells whether a pod may still have running
// containers (the pod workers know). The Manager never reports a
// terminal phase for such a pod: it holds the previous phase back until
// the containers are known to be stopped.
type ContainerActivity interface {
	CouldHaveRunningContainers(uid types.UID) bool
}

// Config configures a Manager.
type Config struct {
	// Sink receives the statuses. Required.
	Sink Sink
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to a no-op logger; it is named "podstatus".
	Logger *zap.Logger
	// SyncPeriod is how often Run syncs even without a change; 0 means
	// DefaultSyncPeriod. Negative is an error.
	SyncPeriod time.Duration
	// ContainerActivity, if set, delays terminal phases until the pod's
	// containers are stopped. Nil means the caller only reports a terminal
	// phase once the containers are stopped.
	ContainerActivity ContainerActivity
}

// Manager is the agent's cache of pod statuses and their delivery to a
// Sink (the kubelet's status manager). Each pod's status has a
// version that grows only when the status changes; SyncOnce hands the sink
// every status newer than the one it last accepted.
//
// Statuses are kept by the UID of the pod the agent runs. For a static pod
// that is the static pod's UID.
//
// Statuses are kept by the pod's own UID, static pods included: the API
// server sink (podstatus/apiserver.PodStatusSink) reports a static pod's
// status on its mirror pod, skips static pods without one, and never
// deletes a mirror pod.
type Manager struct {
	sink     Sink
	clock    clock.Clock
	log      *zap.Logger
	period   time.Duration
	activity ContainerActivity

	mu       sync.Mutex
	statuses map[types.UID]*entry
	once     lifecycle.Once

	// pending holds the pods whose status changed (or must be looked at
	// again) since the last sync; under mu.
	pending map[types.UID]struct{}

	// syncMu serialises the syncs; sent is only touched under it.
	syncMu sync.Mutex
	sent   map[types.UID]sentStatus

	notify chan struct{}

	// changed is closed, and replaced, whenever a status is stored or
	// removed (see Changed); under mu.
	changed chan struct{}
}

// entry is the cached status of one pod.
type entry struct {
	pod      *v1.Pod
	status   v1.PodStatus
	version  uint64
	finished bool
}

// sentStatus is what the sink last accepted for a pod.
type sentStatus struct {
	version uint64
	status  v1.PodStatus
}

// New validates cfg and returns a Manager. It starts nothing.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.Sink == nil {
		errs = append(errs, fmt.Errorf("%w: Sink is required", ErrInvalidConfig))
	}
	if cfg.SyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: SyncPeriod %v is negative", ErrInvalidConfig, cfg.SyncPeriod))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = DefaultSyncPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Manager{
		sink:     cfg.Sink,
		clock:    cfg.Clock,
		log:      cfg.Logger.Named("podstatus"),
		period:   cfg.SyncPeriod,
		activity: cfg.ContainerActivity,
		statuses: make(map[types.UID]*entry),
		sent:     make(map[types.UID]sentStatus),
		pending:  make(map[types.UID]struct{}),
		notify:   make(chan struct{}, 1),
		changed:  make(chan struct{}),
	}, nil
}

// GetPodStatus returns a copy of the cached status of the pod.
func (m *Manager) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.statuses[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// PodPhase returns the phase of the cached status of the pod, without
// copying the status.
func (m *Manager) PodPhase(uid types.UID) (v1.PodPhase, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.statuses[uid]
	if !ok {
		return "", false
	}
	return e.status.Phase, true
}

// Version returns the version of the cached status of the pod (0 if none).
// It grows by one with every change of the status.
func (m *Manager) Version(uid types.UID) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.statuses[uid]; ok {
		return e.version
	}
	return 0
}

// SetPodStatus caches status as the pod's status. The update is ignored
// (and logged) when it would take the pod out of a terminal phase, or move
// a container that will not be restarted out of the terminated state. The
// pod's first StartTime is kept; condition transition times are kept for
// conditions whose status did not change; a terminal phase forces Ready and
// ContainersReady to False. The version grows only if the status changed
// (or the pod has a deletion timestamp, which always produces a new version).
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	if pod == nil {
		m.log.Warn("SetPodStatus without a pod")
		return
	}
	status = *status.DeepCopy()
	status.ObservedGeneration = pod.Generation
	m.mu.Lock()
	changed := m.updateLocked(pod, status, pod.DeletionTimestamp != nil, false)
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

// RecheckPod makes the next sync look at the pod's status again even if
// it did not change: for a pod whose terminal phase was held back while its
// containers could run (ContainerActivity), call it once they are stopped.
// Unknown pods are ignored.
func (m *Manager) RecheckPod(uid types.UID) {
	m.mu.Lock()
	_, ok := m.statuses[uid]
	if ok {
		m.pending[uid] = struct{}{}
	}
	m.mu.Unlock()
	if ok {
		m.signal()
	}
}

// SetContainerReadiness records a readiness probe result for the container
// instance with the given API ContainerID ("<runtime>://<id>") and
// recomputes the pod's Ready and ContainersReady conditions. Unknown pods
// and containers are ignored.
func (m *Manager) SetContainerReadiness(uid types.UID, containerID string, ready bool) {
	m.setContainer(uid, containerID, func(pod *v1.Pod, status *v1.PodStatus, cs *v1.ContainerStatus) bool {
		if cs.Ready == ready {
			return false
		}
		cs.Ready = ready
		all := AllContainerStatuses(status)
		status.Conditions = replaceOrAppendCondition(status.Conditions, PodReadyCondition(pod, status.Conditions, all, status.Phase))
		status.Conditions = replaceOrAppendCondition(status.Conditions, containersReadyCondition(pod, all, status.Phase))
		return true
	})
}

// SetContainerStartup records a startup probe result for the container
// instance with the given API ContainerID and recomputes the pod's
// Initialized condition (a sidecar counts once started). Unknown pods and
// containers are ignored.
func (m *Manager) SetContainerStartup(uid types.UID, containerID string, started bool) {
	m.setContainer(uid, containerID, func(pod *v1.Pod, status *v1.PodStatus, cs *v1.ContainerStatus) bool {
		if cs.Started != nil && *cs.Started == started {
			return false
		}
		cs.Started = &started
		all := AllContainerStatuses(status)
		status.Conditions = replaceOrAppendCondition(status.Conditions, initializedCondition(pod, all, status.Phase))
		return true
	})
}

func (m *Manager) setContainer(uid types.UID, containerID string, apply func(*v1.Pod, *v1.PodStatus, *v1.ContainerStatus) bool) {
	if containerID == "" {
		return
	}
	m.mu.Lock()
	e, ok := m.statuses[uid]
	if !ok {
		m.mu.Unlock()
		m.log.Debug("container probe result before the pod has a status", zap.String("uid", string(uid)), zap.String("containerID", containerID))
		return
	}
	status := *e.status.DeepCopy()
	cs := findByContainerID(&status, containerID)
	if cs == nil || !apply(e.pod, &status, cs) {
		m.mu.Unlock()
		return
	}
	changed := m.updateLocked(e.pod, status, false, false)
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

func findByContainerID(s *v1.PodStatus, id string) *v1.ContainerStatus {
	for i := range s.ContainerStatuses {
		if s.ContainerStatuses[i].ContainerID == id {
			return &s.ContainerStatuses[i]
		}
	}
	for i := range s.InitContainerStatuses {
		if s.InitContainerStatuses[i].ContainerID == id {
			return &s.InitContainerStatuses[i]
		}
	}
	return nil
}

func AllContainerStatuses(s *v1.PodStatus) []v1.ContainerStatus {
	all := make([]v1.ContainerStatus, 0, len(s.InitContainerStatuses)+len(s.ContainerStatuses))
	return append(append(all, s.InitContainerStatuses...), s.ContainerStatuses...)
}

// TerminatePod finalises the status of a pod whose containers have all
// stopped: a container without a terminated state is marked terminated
// with exit code 137 and reason ContainerStatusUnknown (regular containers
// only once the pod has initialized; init containers up to the last one
// that tried to start), and the phase becomes Failed unless it is already
// terminal. As in the kubelet, a static pod keeps its phase. The status is
// marked finished, which lets the sink delete the pod once it is synced.
func (m *Manager) TerminatePod(pod *v1.Pod) {
	if pod == nil {
		m.log.Warn("TerminatePod without a pod")
		return
	}
	m.mu.Lock()
	base := &pod.Status
	if e, ok := m.statuses[pod.UID]; ok {
		base = &e.status
	}
	status := *base.DeepCopy()
	unknown := func() v1.ContainerState {
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  terminatedUnknownMessage,
			ExitCode: 137,
		}}
	}
	if podHasInitialized(pod, base) || podHasInitialized(pod, &pod.Status) {
		for i := range status.ContainerStatuses {
			if status.ContainerStatuses[i].State.Terminated == nil {
				status.ContainerStatuses[i].State = unknown()
			}
		}
	}
	for i := range attemptedInitContainers(status.InitContainerStatuses) {
		if status.InitContainerStatuses[i].State.Terminated == nil {
			status.InitContainerStatuses[i].State = unknown()
		}
	}
	if !kubetypes.IsStaticPod(pod) && !IsTerminalPhase(status.Phase) {
		status.Phase = v1.PodFailed
	}
	changed := m.updateLocked(pod, status, true, true)
	m.mu.Unlock()
	if changed {
		m.signal()
	}
}

// podHasInitialized reports whether status shows that the pod got
// past its init containers: no init containers, a regular container that
// left the waiting state (or ran before), or a last init container that
// completed (or, for a sidecar, started).
func podHasInitialized(pod *v1.Pod, status *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, s := range status.ContainerStatuses {
		if s.LastTerminationState.Terminated != nil || s.State.Waiting == nil {
			return true
		}
	}
	n := len(status.InitContainerStatuses)
	if n == 0 {
		return false
	}
	last := status.InitContainerStatuses[n-1]
	var spec *v1.Container
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == last.Name {
			spec = &pod.Spec.InitContainers[i]
		}
	}
	if spec == nil {
		return false
	}
	if isSidecar(spec) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	if t := last.LastTerminationState.Terminated; t != nil && t.ExitCode == 0 {
		return true
	}
	if t := last.State.Terminated; t != nil && t.ExitCode == 0 {
		return true
	}
	return false
}

// attemptedInitContainers returns the init statuses up to the last
// one that tried to start (left waiting, or has a last termination); at
// least the first one.
func attemptedInitContainers(list []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].State.Waiting == nil || list[i].LastTerminationState.Terminated != nil {
			return list[:i+1]
		}
	}
	if len(list) > 0 {
		return list[:1]
	}
	return nil
}

// RemoveOrphanedStatuses forgets the statuses of every pod whose UID is not in keep.
func (m *Manager) RemoveOrphanedStatuses(keep map[types.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	removed := false
	for uid := range m.statuses {
		if !keep[uid] {
			delete(m.statuses, uid)
			m.pending[uid] = struct{}{} // the next sync forgets what was sent
			removed = true
		}
	}
	if removed {
		m.broadcastLocked()
	}
}

// updateLocked applies an update to the cache; it reports whether a new
// version was stored. m.mu must be held.
func (m *Manager) updateLocked(pod *v1.Pod, status v1.PodStatus, force, finished bool) bool {
	e, cached := m.statuses[pod.UID]
	var old v1.PodStatus
	if cached {
		old = e.status
		if e.finished && !finished && !kubetypes.IsStaticPod(pod) {
			finished = true // once finished, always finished
		}
	} else {
		old = pod.Status
	}
	log := m.log.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("uid", string(pod.UID)))

	if IsTerminalPhase(old.Phase) && status.Phase != old.Phase {
		log.Warn("status update ignored: pod would leave its terminal phase",
			zap.String("phase", string(old.Phase)), zap.String("newPhase", string(status.Phase)))
		return false
	}
	if err := checkContainerTransitions(&old, &status, &pod.Spec); err != nil {
		log.Warn("status update ignored", zap.Error(err))
		return false
	}

	now := m.clock.Now()
	if IsTerminalPhase(status.Phase) {
		forceTerminalReadiness(pod, &status)
	}
	setTransitionTimes(&status, &old, now)
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t := *old.StartTime
		status.StartTime = &t
	case status.StartTime == nil || status.StartTime.IsZero():
		t := metav1.NewTime(now)
		status.StartTime = &t
	}
	if old.ObservedGeneration > status.ObservedGeneration {
		status.ObservedGeneration = old.ObservedGeneration
	}
	normalize(pod, &status)

	if cached && !force && equalByAgent(&e.status, &status) {
		return false
	}
	ne := &entry{pod: pod.DeepCopy(), status: status, finished: finished, version: 1}
	if cached {
		ne.version = e.version + 1
	}
	m.statuses[pod.UID] = ne
	m.pending[pod.UID] = struct{}{}
	m.broadcastLocked()
	return true
}

// broadcastLocked wakes every waiter on Changed. m.mu must be held.
func (m *Manager) broadcastLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// Changed returns a channel closed at the next change of any cached status
// (a new version, or a status removed). A waiter takes the channel first,
// then reads the statuses it cares about, and waits on the channel only if
// they are not yet what it wants: no change is missed, and nothing polls.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// forceTerminalReadiness sets Ready and ContainersReady to False
// (PodCompleted / PodFailed) if either is True in a terminal status.
func forceTerminalReadiness(pod *v1.Pod, s *v1.PodStatus) {
	_, r := FindCondition(s.Conditions, v1.PodReady)
	_, cr := FindCondition(s.Conditions, v1.ContainersReady)
	if (r == nil || r.Status != v1.ConditionTrue) && (cr == nil || cr.Status != v1.ConditionTrue) {
		return
	}
	s.Conditions = replaceOrAppendCondition(s.Conditions, terminalReadyCondition(pod, v1.ContainersReady, s.Phase))
	s.Conditions = replaceOrAppendCondition(s.Conditions, terminalReadyCondition(pod, v1.PodReady, s.Phase))
}

// checkContainerTransitions refuses a status in which a container
// that terminated and will not be restarted is no longer terminated.
func checkContainerTransitions(old, next *v1.PodStatus, spec *v1.PodSpec) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways || spec.RestartPolicy == "" {
		return nil
	}
	for _, c := range spec.InitContainers {
		for _, r := range c.RestartPolicyRules {
			if r.Action == v1.ContainerRestartRuleActionRestartAllContainers {
				return nil
			}
		}
	}
	for _, c := range spec.Containers {
		for _, r := range c.RestartPolicyRules {
			if r.Action == v1.ContainerRestartRuleActionRestartAllContainers {
				return nil
			}
		}
	}
	check := func(olds, news []v1.ContainerStatus, specs []v1.Container, kind string) error {
		for _, o := range olds {
			if o.State.Terminated == nil {
				continue
			}
			var c *v1.Container
			for i := range specs {
				if specs[i].Name == o.Name {
					c = &specs[i]
				}
			}
			if c == nil {
				continue
			}
			if isSidecar(c) && kind == "init container" {
				continue
			}
			code := o.State.Terminated.ExitCode
			if code != 0 && spec.RestartPolicy == v1.RestartPolicyOnFailure {
				continue
			}
			if containerShouldRestart(c, spec, code) {
				continue
			}
			for _, n := range news {
				if n.Name == o.Name && n.State.Terminated == nil {
					return fmt.Errorf("terminated %s %q may not leave the terminated state", kind, n.Name)
				}
			}
		}
		return nil
	}
	if err := check(old.ContainerStatuses, next.ContainerStatuses, spec.Containers, "container"); err != nil {
		return err
	}
	return check(old.InitContainerStatuses, next.InitContainerStatuses, spec.InitContainers, "init container")
}

// normalize brings a status to what an API server stores: times at
// second precision, termination messages within their share of 12 KiB,
// container statuses sorted (regular and ephemeral by name, init in spec order).
func normalize(pod *v1.Pod, s *v1.PodStatus) {
	per := maxTerminationMessage
	if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers) + len(pod.Spec.EphemeralContainers); n > 0 {
		per /= n
	}
	trunc := func(t *metav1.Time) { *t = t.Rfc3339Copy() }
	state := func(c *v1.ContainerState) {
		if c.Running != nil {
			trunc(&c.Running.StartedAt)
		}
		if c.Terminated != nil {
			trunc(&c.Terminated.StartedAt)
			trunc(&c.Terminated.FinishedAt)
			if len(c.Terminated.Message) > per {
				c.Terminated.Message = c.Terminated.Message[:per]
			}
		}
	}
	if s.StartTime != nil {
		trunc(s.StartTime)
	}
	for i := range s.Conditions {
		trunc(&s.Conditions[i].LastProbeTime)
		trunc(&s.Conditions[i].LastTransitionTime)
	}
	for _, list := range [][]v1.ContainerStatus{s.ContainerStatuses, s.InitContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			state(&list[i].State)
			state(&list[i].LastTerminationState)
		}
	}
	sort.SliceStable(s.ContainerStatuses, func(i, j int) bool { return s.ContainerStatuses[i].Name < s.ContainerStatuses[j].Name })
	sort.SliceStable(s.EphemeralContainerStatuses, func(i, j int) bool {
		return s.EphemeralContainerStatuses[i].Name < s.EphemeralContainerStatuses[j].Name
	})
	order := make(map[string]int, len(pod.Spec.InitContainers))
	for i, c := range pod.Spec.InitContainers {
		order[c.Name] = i
	}
	sort.SliceStable(s.InitContainerStatuses, func(i, j int) bool {
		return order[s.InitContainerStatuses[i].Name] < order[s.InitContainerStatuses[j].Name]
	})
}

// equalByAgent compares two normalised statuses on what the agent
// owns: its conditions by type, status, reason and message (not times), and
// every other field except others' conditions and resource claim statuses.
func equalByAgent(a, b *v1.PodStatus) bool {
	owned := func(s *v1.PodStatus) map[v1.PodConditionType]v1.PodCondition {
		out := make(map[v1.PodConditionType]v1.PodCondition)
		for _, c := range s.Conditions {
			if conditionOwnedByAgent(c.Type) || conditionShared(c.Type) {
				out[c.Type] = c
			}
		}
		return out
	}
	ac, bc := owned(a), owned(b)
	if len(ac) != len(bc) {
		return false
	}
	for t, c := range bc {
		o, ok := ac[t]
		if !ok || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message {
			return false
		}
	}
	x := *a
	x.Conditions = b.Conditions
	x.ResourceClaimStatuses = b.ResourceClaimStatuses
	x.ExtendedResourceClaimStatus = b.ExtendedResourceClaimStatus
	x.NodeAllocatableResourceClaimStatuses = b.NodeAllocatableResourceClaimStatuses
	// reflect.DeepEqual is the stricter test and about four times faster
	// (no per-type lookups); the semantic one only decides when it fails
	// (times in other locations, quantities spelled differently, nil
	// against empty).
	return reflect.DeepEqual(&x, b) || apiequality.Semantic.DeepEqual(&x, b)
}

// mergeStatus is the status to hand the sink, given the status it holds
// (prev): others' conditions from prev with the agent's from next; a
// terminal phase is held back while the pod may still have running
// containers; a terminal phase has Ready and ContainersReady False.
func mergeStatus(pod *v1.Pod, prev, next v1.PodStatus, couldRun bool) v1.PodStatus {
	conds := make([]v1.PodCondition, 0, len(prev.Conditions)+len(next.Conditions))
	for _, c := range prev.Conditions {
		if !conditionOwnedByAgent(c.Type) {
			conds = append(conds, c)
		}
	}
	toTerminal := !IsTerminalPhase(prev.Phase) && IsTerminalPhase(next.Phase)
	for _, c := range next.Conditions {
		switch {
		case conditionOwnedByAgent(c.Type):
			conds = append(conds, c)
		case conditionShared(c.Type) && toTerminal && !couldRun:
			conds = replaceOrAppendCondition(conds, c)
		}
	}
	next.Conditions = conds
	next.ResourceClaimStatuses = prev.ResourceClaimStatuses
	next.ExtendedResourceClaimStatus = prev.ExtendedResourceClaimStatus
	next.NodeAllocatableResourceClaimStatuses = prev.NodeAllocatableResourceClaimStatuses
	if toTerminal && couldRun {
		next.Phase, next.Reason, next.Message = prev.Phase, prev.Reason, prev.Message
	}
	if IsTerminalPhase(next.Phase) {
		forceTerminalReadiness(pod, &next)
	}
	return next
}

// toSync is one pod status picked for a sync.
type toSync struct {
	uid      types.UID
	pod      *v1.Pod
	status   v1.PodStatus
	version  uint64
	finished bool
}

// SyncOnce offers the sink every status it has not accepted yet: those
// whose version is newer than the last accepted one, and those whose
// delivered form changed (a terminal phase held back until the containers
// stopped). Only pods whose status changed since the last sync, or that
// were left pending by it, are looked at: the cost grows with the changes,
// not with the number of pods. A status the sink refuses stays pending for
// the next call; the errors of all refusals are returned together, each
// wrapping ErrSink. After a successful sync of a finished, terminal
// pod with a deletion timestamp, a sink that implements PodDeleter is
// asked to delete it, and its status is forgotten.
//
// The sink gets its own copies of the pod and the status.
func (m *Manager) SyncOnce(ctx context.Context) error {
	return m.syncBatch(ctx, false)
}

// ResyncAll is SyncOnce over every cached status, changed or not (Run does
// it every SyncPeriod, as the kubelet does). An unchanged status whose
// delivered form is what the sink already accepted is not sent again; no
// status is copied unless it is sent.
func (m *Manager) ResyncAll(ctx context.Context) error {
	return m.syncBatch(ctx, true)
}

func (m *Manager) syncBatch(ctx context.Context, all bool) error {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()

	// Entries are never changed in place (updates store a new entry), so
	// their pod and status may be read here without the lock and without
	// copies, as long as nothing below writes into them.
	m.mu.Lock()
	var todo []toSync
	var forget []types.UID // sent once, status since removed
	pick := func(uid types.UID) {
		e, ok := m.statuses[uid]
		if !ok {
			if _, sent := m.sent[uid]; sent {
				forget = append(forget, uid)
				delete(m.sent, uid)
			}
			return
		}
		todo = append(todo, toSync{uid: uid, pod: e.pod, status: e.status, version: e.version, finished: e.finished})
	}
	if all {
		todo = make([]toSync, 0, len(m.statuses))
		for uid := range m.statuses {
			pick(uid)
		}
		for uid := range m.sent {
			if _, ok := m.statuses[uid]; !ok {
				forget = append(forget, uid)
				delete(m.sent, uid)
			}
		}
	} else {
		todo = make([]toSync, 0, len(m.pending))
		for uid := range m.pending {
			pick(uid)
		}
	}
	clear(m.pending)
	m.mu.Unlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i].uid < todo[j].uid })
	if f, ok := m.sink.(PodForgetter); ok {
		for _, uid := range forget {
			f.ForgetPod(uid)
		}
	}

	deleter, canDelete := m.sink.(PodDeleter)
	var errs []error
	var again []types.UID // looked at again by the next sync
	for i, t := range todo {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			for _, r := range todo[i:] {
				again = append(again, r.uid)
			}
			break
		}
		sent, ok := m.sent[t.uid]
		prev := t.pod.Status
		if ok {
			prev = sent.status
		}
		couldRun := m.activity != nil && m.activity.CouldHaveRunningContainers(t.uid)
		// mergeStatus reads prev and next and builds fresh slices for
		// what it changes: shallow views are enough here.
		merged := mergeStatus(t.pod, prev, t.status, couldRun)
		heldBack := IsTerminalPhase(t.status.Phase) && !IsTerminalPhase(merged.Phase)
		if heldBack {
			again = append(again, t.uid)
			if !ok {
				// The sink has nothing of this pod yet: a placeholder
				// (the pod's old status) would be its first report.
				// Wait for the terminal status instead.
				continue
			}
		}
		deletable := canDelete && t.finished && t.pod.DeletionTimestamp != nil && !kubetypes.IsMirrorPod(t.pod) && IsTerminalPhase(merged.Phase)
		if ok && sent.version >= t.version && equalByAgent(&sent.status, &merged) && !deletable {
			continue
		}
		pod := podCopy(t.pod, &merged)
		if err := m.sink.SyncPodStatus(ctx, pod, *merged.DeepCopy()); err != nil {
			m.log.Info("pod status not delivered", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Uint64("version", t.version), zap.Error(err))
			errs = append(errs, fmt.Errorf("%w: pod %s/%s (uid %s): %w", ErrSink, pod.Namespace, pod.Name, t.uid, err))
			if !heldBack {
				again = append(again, t.uid)
			}
			continue
		}
		m.sent[t.uid] = sentStatus{version: t.version, status: merged}
		if !deletable {
			continue
		}
		if err := deleter.DeletePod(ctx, pod); err != nil {
			errs = append(errs, fmt.Errorf("%w: deleting pod %s/%s (uid %s): %w", ErrSink, pod.Namespace, pod.Name, t.uid, err))
			again = append(again, t.uid)
			continue
		}
		m.mu.Lock()
		if e, ok := m.statuses[t.uid]; ok && e.version == t.version {
			delete(m.statuses, t.uid)
		}
		m.mu.Unlock()
		delete(m.sent, t.uid)
	}
	if len(again) > 0 {
		m.mu.Lock()
		for _, uid := range again {
			m.pending[uid] = struct{}{}
		}
		m.mu.Unlock()
	}
	return errors.Join(errs...)
}

// podCopy is a deep copy of pod with status as its status, without
// copying the pod's old status.
func podCopy(pod *v1.Pod, status *v1.PodStatus) *v1.Pod {
	shallow := *pod
	shallow.Status = v1.PodStatus{}
	out := shallow.DeepCopy()
	out.Status = *status.DeepCopy()
	return out
}

// Recheck has Run sync the pending statuses soon: those held back while
// their pods could have running containers, and those the sink refused.
// The sync loop calls it once the pod workers know every pod, when a
// pod without a worker stops counting as possibly running.
func (m *Manager) Recheck() { m.signal() }

// signal wakes Run (coalesced).
func (m *Manager) signal() {
	select {
	case m.notify <- struct{}{}:
	default:
	}
}

// Run syncs at once, then whenever a status changes and every SyncPeriod,
// until ctx is done; it returns nil then. It runs in the caller's goroutine
// and starts none. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}

	timer := m.clock.NewTimer(m.period)
	defer timer.Stop()
	m.syncAndLog(ctx, true)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.notify:
			m.syncAndLog(ctx, false)
		case <-timer.C():
			timer.Reset(m.period)
			m.syncAndLog(ctx, true)
		}
	}
}

func (m *Manager) syncAndLog(ctx context.Context, all bool) {
	if err := m.syncBatch(ctx, all); err != nil && ctx.Err() == nil {
		m.log.Warn("pod status sync incomplete", zap.Error(err))
	}
}
