package cpumanager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/lifecycle"
)

// Labels read from CRI containers (the keys in runtime/labels.go).
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// AdmitReason is the rejection reason Admit gives when allocation fails
// (the kubelet's).
const AdmitReason = "UnexpectedAdmissionError"

// Manager assigns CPUs to containers. All methods are safe for concurrent
// use.
type Manager struct {
	once     lifecycle.Once
	cfg      Config
	reserved cpuset.CPUSet
	alloc    *allocator // static only
	fs       checkpoint.FS

	mu      sync.Mutex
	started bool
	st      state
	// unwritten: st holds a removal (RemovePod) the checkpoint does not
	// have yet. The next write of any kind carries it.
	unwritten  bool
	activePods func() []*v1.Pod
	// lastApplied is the cpuset last sent per CRI container id.
	lastApplied map[string]string

	mRequests, mErrors prometheus.Counter
	mExclusive         prometheus.Gauge
}

// New validates cfg and returns a Manager. It does no I/O; call Start.
func New(cfg Config) (*Manager, error) {
	cfg, reserved, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:         cfg,
		reserved:    reserved,
		fs:          checkpoint.OS{},
		lastApplied: map[string]string{},
		mRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "cpu_manager", Name: "pinning_requests_total",
			Help: "Exclusive cpu allocations attempted.",
		}),
		mErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "cpu_manager", Name: "pinning_errors_total",
			Help: "Exclusive cpu allocations that failed.",
		}),
		mExclusive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nodekit", Subsystem: "cpu_manager", Name: "exclusive_cpus",
			Help: "CPUs currently assigned exclusively to containers.",
		}),
	}
	if cfg.Policy == PolicyStatic {
		m.alloc = newAllocator(cfg.Topology)
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{m.mRequests, m.mErrors, m.mExclusive} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
			}
		}
	}
	return m, nil
}

// Policy returns the policy name.
func (m *Manager) Policy() string { return m.cfg.Policy }

// ReservedCPUs returns the reserved set (empty for the none policy).
func (m *Manager) ReservedCPUs() cpuset.CPUSet { return m.reserved.Clone() }

// Start loads the checkpoint from StateDir. A file that is corrupt,
// written by another policy or inconsistent with this machine and
// reservation is set aside as cpu_manager_state.corrupt, logged as an
// error: a bad file never stops the agent. Under the static policy, when
// the file was set aside or is missing (or was never initialised), the
// state is rebuilt from the running containers: a running container of a
// Guaranteed pod among activePods() whose cpu request is N whole CPUs and
// whose current cpuset (Config.CurrentCPUSet, else CRI ContainerStatus
// Status.Resources.Linux.CpusetCpus) is N CPUs of the machine, none
// reserved and none shared with another such container, keeps them; every
// other container returns to the shared pool on the next Reconcile (each
// one left out is logged). The rebuilt state is written before Start
// returns. activePods lists the pods that may hold CPUs (also for
// Reconcile's stale-state purge and cpuset updates); nil means every
// container found and rebuilds nothing. A state restored from the
// checkpoint is reconciled with the runtime (with a Runtime, static
// policy): the assignments of pods none of whose containers runs any more
// (a removal lost in a crash) go back to the shared pool and that is
// written before Start returns. Start returns an error only when the
// directory cannot be read or the new state cannot be written.
func (m *Manager) Start(ctx context.Context, activePods func() []*v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.activePods = activePods
	loaded, err := m.load()
	switch {
	case err == nil && loaded.defaultSet.IsEmpty() && m.cfg.Policy == PolicyStatic:
		// An empty static state (no pool, no assignments) is initialised.
	case err == nil:
		m.st = loaded
		m.started = true
		m.updateGauge()
		m.cfg.Logger.Info("cpu manager state restored", zap.String("policy", m.cfg.Policy),
			zap.Stringer("defaultCPUSet", loaded.defaultSet), zap.Int("pods", len(loaded.entries)))
		return m.dropGoneLocked(ctx)
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, ErrCorruptState) || errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrTooLarge):
		moved, aerr := checkpoint.SetAsideFS(m.fs, m.cfg.StateDir, StateFileName)
		m.cfg.Logger.Error("cpu manager checkpoint is unusable: set aside, rebuilding the state from the running containers",
			zap.Error(err), zap.String("setAside", moved), zap.NamedError("setAsideError", aerr))
		if aerr != nil && moved == "" {
			return fmt.Errorf("cpumanager: set aside the corrupt checkpoint: %w", aerr)
		}
	default:
		return fmt.Errorf("cpumanager: read checkpoint: %w", err)
	}
	fresh := newState(cpuset.New())
	if m.cfg.Policy == PolicyStatic {
		fresh = m.rebuild(ctx, activePods)
		if err := validateStatic(fresh, m.cfg.Topology.All(), m.reserved); err != nil {
			// Cannot happen (rebuild keeps the invariants); be safe.
			m.cfg.Logger.Error("rebuilt cpu manager state is inconsistent, starting empty", zap.Error(err))
			fresh = newState(m.cfg.Topology.All())
		}
	}
	if err := m.persist(fresh); err != nil {
		return err
	}
	m.st = fresh
	m.started = true
	m.updateGauge()
	if len(fresh.entries) > 0 {
		m.cfg.Logger.Info("cpu manager state rebuilt from running containers",
			zap.Stringer("defaultCPUSet", fresh.defaultSet), zap.Int("pods", len(fresh.entries)))
	}
	return nil
}

// dropGoneLocked returns to the shared pool, at Start, the CPUs of every
// pod in the restored state that has no running (or created) container in
// the runtime: a removal lost in a crash, or a pod that ended while the
// agent was down. Nothing of such a pod runs on them; when the pod comes
// back, admission allocates again. A pod with one live container keeps all
// its assignments (its finished init containers' CPUs are its app
// containers' to reuse). A failed listing is logged and changes nothing:
// the purge then waits for Reconcile once the sources are ready.
func (m *Manager) dropGoneLocked(ctx context.Context) error {
	if m.cfg.Policy != PolicyStatic || m.cfg.Runtime == nil || len(m.st.entries) == 0 {
		return nil
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{})
	if err != nil {
		m.cfg.Logger.Warn("cpu manager: the runtime's containers are unknown at start, assignments kept until the sources are ready",
			zap.Error(err))
		return nil
	}
	live := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		switch c.GetState() {
		case runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_CREATED:
			if uid := c.GetLabels()[labelPodUID]; uid != "" {
				live[uid] = true
			}
		}
	}
	var gone []string
	for uid := range m.st.entries {
		if !live[uid] {
			gone = append(gone, uid)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	next := m.st.clone()
	for _, uid := range gone {
		for name, cpus := range next.entries[uid] {
			m.cfg.Logger.Info("cpu manager: assignment of a container that no longer runs returned to the shared pool at start",
				zap.String("podUID", uid), zap.String("container", name), zap.Stringer("cpuset", cpus))
		}
		for name := range next.entries[uid] {
			removeFrom(&next, uid, name)
		}
	}
	return m.commit(next)
}

// load reads and checks the checkpoint.
func (m *Manager) load() (state, error) {
	b, err := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName)
	if err != nil {
		return state{}, err
	}
	policy, st, err := decodeState(b)
	if err != nil {
		return state{}, err
	}
	if policy != m.cfg.Policy {
		return state{}, fmt.Errorf("%w: the checkpoint was written by policy %q, configured is %q", ErrCorruptState, policy, m.cfg.Policy)
	}
	switch m.cfg.Policy {
	case PolicyStatic:
		if err := validateStatic(st, m.cfg.Topology.All(), m.reserved); err != nil {
			return state{}, err
		}
	default:
		if !st.defaultSet.IsEmpty() || len(st.entries) > 0 {
			return state{}, fmt.Errorf("%w: the none policy holds no cpus", ErrCorruptState)
		}
	}
	return st, nil
}

// persist writes s as the checkpoint. When the write reports an error the
// file is read back: if it already holds s (the error came after the
// rename, from the directory sync) the write counts as done, since a
// restart would read s; otherwise the old file is in place and the error
// is returned.
func (m *Manager) persist(s state) error {
	data := encodeState(m.cfg.Policy, s)
	err := checkpoint.WriteFS(m.fs, m.cfg.StateDir, StateFileName, data)
	if err == nil {
		return nil
	}
	if got, rerr := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName); rerr == nil && bytes.Equal(got, data) {
		m.cfg.Logger.Warn("cpu manager checkpoint written, but its durability is unknown", zap.Error(err))
		return nil
	}
	return fmt.Errorf("cpumanager: write checkpoint: %w", err)
}

// updateGauge sets the exclusive-cpu gauge: every cpu not in the pool is
// held exclusively (a valid static state covers the machine).
func (m *Manager) updateGauge() {
	if m.cfg.Policy == PolicyStatic {
		m.mExclusive.Set(float64(m.cfg.Topology.NumCPUs() - m.st.defaultSet.Size()))
	}
}

// reusable are the CPUs of the pod's finished-by-design init containers
// that its app containers and sidecars don't already hold: an app
// container may take them, since init containers don't run alongside.
func reusable(s state, pod *v1.Pod) cpuset.CPUSet {
	ctrs := s.entries[string(pod.UID)]
	if len(ctrs) == 0 {
		return cpuset.New()
	}
	var fromInit, held []cpuset.CPUSet
	for name, set := range ctrs {
		if _, plainInit := findContainer(pod, name); plainInit {
			fromInit = append(fromInit, set)
		} else {
			held = append(held, set)
		}
	}
	return cpuset.New().Union(fromInit...).Difference(cpuset.New().Union(held...))
}

// allocateInto gives the container its exclusive CPUs in s (a clone). It
// reports whether s changed.
func (m *Manager) allocateInto(s *state, pod *v1.Pod, c *v1.Container) (bool, error) {
	n := exclusiveCPUs(pod, c)
	if n == 0 {
		return false, nil
	}
	uid := string(pod.UID)
	if _, ok := s.get(uid, c.Name); ok {
		return false, nil // already allocated: a repeat is a no-op
	}
	m.mRequests.Inc()
	reuse := reusable(*s, pod)
	avail := s.defaultSet.Difference(m.reserved)
	if !reuse.IsEmpty() {
		avail = avail.Union(reuse)
	}
	if n >= maxCPURequest {
		// n is capped at the bound the allocator looks at: report what was
		// asked for, not the bound.
		m.mErrors.Inc()
		return false, fmt.Errorf("container %q of pod %s: %w to satisfy request: requested=%s, available=%d",
			c.Name, podName(pod), ErrNotEnoughCPUs, requestedCPUs(c), avail.Size())
	}
	set, err := m.alloc.take(avail, n)
	if err != nil {
		m.mErrors.Inc()
		return false, fmt.Errorf("container %q of pod %s: %w", c.Name, podName(pod), err)
	}
	s.set(uid, c.Name, set)
	s.defaultSet = s.defaultSet.Difference(set)
	return true, nil
}

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// commit persists next and makes it the state.
// The write carries any removal RemovePod left unwritten.
func (m *Manager) commit(next state) error {
	if err := m.persist(next); err != nil {
		return err
	}
	m.st = next
	m.unwritten = false
	m.updateGauge()
	return nil
}

// flushLocked writes the state when it holds an unwritten removal.
func (m *Manager) flushLocked() error {
	if !m.unwritten {
		return nil
	}
	return m.commit(m.st)
}

// Flush writes a removal RemovePod left in memory only (a no-op when
// there is none). Run calls it every period and when it returns.
func (m *Manager) Flush() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	return m.flushLocked()
}

// Allocate gives one container of a pod its exclusive CPUs if it is
// entitled to them (static policy, Guaranteed pod, whole-number cpu
// request); others use the shared pool and nothing changes. A container
// that already has CPUs keeps them. The new state is written to the
// checkpoint before Allocate returns nil. A shortage wraps
// ErrNotEnoughCPUs.
func (m *Manager) Allocate(pod *v1.Pod, c *v1.Container) error {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	if pod == nil || c == nil {
		return fmt.Errorf("cpumanager: Allocate: nil pod or container")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	next := m.st.clone()
	changed, err := m.allocateInto(&next, pod, c)
	if err != nil || !changed {
		return err
	}
	return m.commit(next)
}

// AllocatePod allocates for every container of the pod (init containers
// first, in order), all or nothing, with one checkpoint write.
func (m *Manager) AllocatePod(pod *v1.Pod) error {
	if m.cfg.Policy != PolicyStatic || pod == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	next := m.st.clone()
	changed := false
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			ch, err := m.allocateInto(&next, pod, &list[i])
			if err != nil {
				return err
			}
			changed = changed || ch
		}
	}
	if !changed {
		return nil
	}
	return m.commit(next)
}

// Admit allocates the pod's exclusive CPUs (AllocatePod) and rejects it
// when that fails, with the kubelet's reason and message. It matches the
// sync loop's admission interface through a small adapter (see the
// package documentation).
func (m *Manager) Admit(pod *v1.Pod, _ []*v1.Pod) (ok bool, reason, message string) {
	if err := m.AllocatePod(pod); err != nil {
		return false, AdmitReason, fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)
	}
	return true, "", ""
}

// RemoveContainer returns a container's exclusive CPUs to the shared pool
// (those a sibling still holds, as an app container reusing an init
// container's CPUs, stay taken). Unknown containers are a no-op.
func (m *Manager) RemoveContainer(podUID, containerName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	if _, ok := m.st.get(podUID, containerName); !ok {
		return nil
	}
	next := m.st.clone()
	removeFrom(&next, podUID, containerName)
	return m.commit(next)
}

func removeFrom(s *state, podUID, name string) {
	set := s.entries[podUID][name]
	s.remove(podUID, name)
	var siblings []cpuset.CPUSet
	for _, other := range s.entries[podUID] {
		siblings = append(siblings, other)
	}
	s.defaultSet = s.defaultSet.Union(set.Difference(cpuset.New().Union(siblings...)))
}

// RemovePod returns every exclusive CPU of the pod to the shared pool;
// call it when the pod has terminated. It changes the state in memory
// only: the checkpoint gets the removal with the next write (the next
// allocation, removal of a container, stale-state purge, or Reconcile /
// Flush, so within one ReconcilePeriod when Run runs). That is safe
// because every write is the whole state: an allocation that hands the
// freed CPUs to another container is written together with the removal,
// so no checkpoint ever assigns a CPU twice. A removal lost in a crash
// leaves the pod's assignment in the checkpoint, as if the pod had ended
// while the agent was down: the next Start returns its CPUs to the shared
// pool when the runtime runs none of the pod's containers (with a
// Runtime), else the first Reconcile after the sources are ready purges
// it (the pod is no longer active).
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	if len(m.st.entries[podUID]) == 0 {
		return nil
	}
	next := m.st.clone()
	for name := range next.entries[podUID] {
		removeFrom(&next, podUID, name)
	}
	m.st = next
	m.unwritten = true
	m.updateGauge()
	return nil
}

// GetCPUSet returns the container's exclusive CPUs and true, or the
// shared pool and false when it has none. The none policy pins nothing:
// an empty set and false.
func (m *Manager) GetCPUSet(podUID, containerName string) (cpuset.CPUSet, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if set, ok := m.st.get(podUID, containerName); ok {
		return set.Clone(), true
	}
	return m.st.defaultSet.Clone(), false
}

// DefaultCPUSet returns the shared pool (reserved CPUs included).
func (m *Manager) DefaultCPUSet() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.defaultSet.Clone()
}

// ContainerCPUSet is the cpuset (Linux list format) a container is created
// with: its exclusive CPUs, else the shared pool. ok is false under the
// none policy or before Start (the runtime then leaves cpuset alone). It
// satisfies kuberuntime.CPUSetProvider.
func (m *Manager) ContainerCPUSet(pod *v1.Pod, c *v1.Container) (string, bool) {
	if m.cfg.Policy != PolicyStatic || pod == nil || c == nil {
		return "", false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return "", false
	}
	if set, ok := m.st.get(string(pod.UID), c.Name); ok {
		return set.String(), true
	}
	if m.st.defaultSet.IsEmpty() {
		return "", false
	}
	return m.st.defaultSet.String(), true
}

// Reconcile is one pass of the reconcile loop. When the sources are ready
// it purges assignments of pods that are no longer active (or containers
// no longer in their pod's spec), with one checkpoint write; then it sends
// every running container of an active pod its cpuset (exclusive or
// shared pool) through CRI UpdateContainerResources when it differs from
// what was last sent. Errors of single containers are joined; the pass
// goes on.
func (m *Manager) Reconcile(ctx context.Context) error {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	m.mu.Lock()
	if !m.started {
		m.mu.Unlock()
		return ErrNotStarted
	}
	var active map[string]*v1.Pod
	if m.activePods != nil {
		pods := m.activePods()
		active = make(map[string]*v1.Pod, len(pods))
		for _, p := range pods {
			if p != nil {
				active[string(p.UID)] = p
			}
		}
	}
	var errs []error
	if active != nil && m.cfg.SourcesReady() {
		if err := m.purgeStaleLocked(active); err != nil {
			errs = append(errs, err)
		}
	}
	if err := m.flushLocked(); err != nil {
		errs = append(errs, err)
	}
	m.mu.Unlock()
	if m.cfg.Runtime == nil {
		return errors.Join(errs...)
	}
	ctrs, err := m.cfg.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("cpumanager: list containers: %w", err))...)
	}
	seen := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		uid, name := c.GetLabels()[labelPodUID], c.GetLabels()[labelContainerName]
		if uid == "" || name == "" || c.GetId() == "" {
			continue
		}
		if active != nil && active[uid] == nil {
			continue
		}
		seen[c.GetId()] = true
		set, _ := m.GetCPUSet(uid, name)
		want := set.String()
		if want == "" {
			continue
		}
		m.mu.Lock()
		last := m.lastApplied[c.GetId()]
		m.mu.Unlock()
		if last == want {
			continue
		}
		err := m.cfg.Runtime.UpdateContainerResources(ctx, c.GetId(), &runtimeapi.ContainerResources{
			Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: want},
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cpumanager: update cpuset of container %s (%s of pod %s): %w", c.GetId(), name, uid, err))
			continue
		}
		m.mu.Lock()
		m.lastApplied[c.GetId()] = want
		m.mu.Unlock()
	}
	m.mu.Lock()
	for id := range m.lastApplied {
		if !seen[id] {
			delete(m.lastApplied, id)
		}
	}
	m.mu.Unlock()
	return errors.Join(errs...)
}

func (m *Manager) purgeStaleLocked(active map[string]*v1.Pod) error {
	type key struct{ uid, name string }
	var stale []key
	for uid, ctrs := range m.st.entries {
		for name := range ctrs {
			if p := active[uid]; p == nil {
				stale = append(stale, key{uid, name})
			} else if c, _ := findContainer(p, name); c == nil {
				stale = append(stale, key{uid, name})
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	sort.Slice(stale, func(i, j int) bool {
		if stale[i].uid != stale[j].uid {
			return stale[i].uid < stale[j].uid
		}
		return stale[i].name < stale[j].name
	})
	next := m.st.clone()
	for _, k := range stale {
		removeFrom(&next, k.uid, k.name)
		m.cfg.Logger.Info("removing stale cpu assignment", zap.String("podUID", k.uid), zap.String("container", k.name))
	}
	return m.commit(next)
}

// Run calls Reconcile every ReconcilePeriod until ctx ends, logging
// errors, and returns nil then. Under the none policy it only waits.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	if m.cfg.Policy != PolicyStatic {
		<-ctx.Done()
		return nil
	}
	for {
		if err := m.Reconcile(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("cpu manager reconcile", zap.Error(err))
		}
		t := m.cfg.Clock.NewTimer(m.cfg.ReconcilePeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			if err := m.Flush(); err != nil {
				m.cfg.Logger.Warn("cpu manager: writing the last removal", zap.Error(err))
			}
			return nil
		case <-t.C():
		}
	}
}
