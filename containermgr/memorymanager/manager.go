package memorymanager

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

// Policy names, as the kubelet's --memory-manager-policy.
const (
	PolicyNone   = "None"
	PolicyStatic = "Static"
)

// StateFileName is the checkpoint's name inside Config.StateDir.
const StateFileName = "memory_manager_state"

// AdmitReason is the rejection reason Admit gives (the kubelet's).
const AdmitReason = "UnexpectedAdmissionError"

// Reservation is the memory kept back on one NUMA node (the kubelet's
// --reserved-memory), per resource: memory and hugepages-<size>.
type Reservation struct {
	NUMANode int
	Limits   v1.ResourceList
}

// Config configures a Manager.
type Config struct {
	// Policy is PolicyNone (default) or PolicyStatic.
	Policy string
	// Machine is the NUMA nodes' memory (ReadMachine). Required for Static.
	Machine []NUMANode
	// ReservedMemory is what each NUMA node keeps back. For Static it must
	// add up, per resource, to NodeAllocatableReservation (system-reserved +
	// kube-reserved + hard eviction threshold), and may not be empty.
	ReservedMemory             []Reservation
	NodeAllocatableReservation v1.ResourceList
	// StateDir holds the memory_manager_state checkpoint. Required.
	StateDir string

	Clock      clock.Clock
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

func isMemoryResource(r v1.ResourceName) bool {
	return r == v1.ResourceMemory || strings.HasPrefix(string(r), v1.ResourceHugePagesPrefix)
}

// ValidateReservedMemory checks that, for memory and every hugepage size,
// the reserved memory summed over NUMA nodes equals the node allocatable
// reservation (as the kubelet does), and that every reservation names an
// existing NUMA node. Errors wrap ErrInvalidReservedMemory.
func ValidateReservedMemory(machine []NUMANode, nodeAllocatableReservation v1.ResourceList, reserved []Reservation) error {
	known := map[int]bool{}
	for _, n := range machine {
		known[n.ID] = true
	}
	total := map[v1.ResourceName]*resource.Quantity{}
	for _, r := range reserved {
		if !known[r.NUMANode] {
			return fmt.Errorf("%w: the reserved memory configuration references NUMA node %d that does not exist on this machine", ErrInvalidReservedMemory, r.NUMANode)
		}
		for name, q := range r.Limits {
			if total[name] == nil {
				total[name] = resource.NewQuantity(0, resource.BinarySI)
			}
			total[name].Add(q)
		}
	}
	for name := range nodeAllocatableReservation {
		if isMemoryResource(name) && total[name] == nil {
			total[name] = resource.NewQuantity(0, resource.BinarySI)
		}
	}
	names := slices.Sorted(maps.Keys(total))
	for _, name := range names {
		want := resource.NewQuantity(0, resource.BinarySI)
		if q, ok := nodeAllocatableReservation[name]; ok {
			want.Add(q)
		}
		if total[name].Cmp(*want) != 0 {
			return fmt.Errorf("%w: the total amount %q of type %q is not equal to the value %q determined by Node Allocatable feature",
				ErrInvalidReservedMemory, total[name].String(), name, want.String())
		}
	}
	return nil
}

// Block is memory of one resource type a container holds on a set of NUMA
// nodes (more than one when no single node fitted).
type Block struct {
	NUMAAffinity []int           `json:"numaAffinity"`
	Type         v1.ResourceName `json:"type"`
	Size         uint64          `json:"size"`
}

// Manager accounts NUMA memory for Guaranteed pods. Safe for concurrent use.
type Manager struct {
	cfg Config
	fs  checkpoint.FS
	// allocatable per node and resource (capacity − reserved).
	allocatable map[int]map[v1.ResourceName]uint64
	nodeIDs     []int

	mu      sync.Mutex
	started bool
	entries map[string]map[string][]Block
}

// New validates cfg. It does no I/O.
func New(cfg Config) (*Manager, error) {
	if cfg.Policy == "" {
		cfg.Policy = PolicyNone
	}
	if cfg.StateDir == "" {
		return nil, fmt.Errorf("%w: StateDir is required", ErrInvalidConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Logger = cfg.Logger.Named("memorymanager")
	m := &Manager{cfg: cfg, fs: checkpoint.OS{}, allocatable: map[int]map[v1.ResourceName]uint64{}}
	switch cfg.Policy {
	case PolicyNone:
		return m, nil
	case PolicyStatic:
	default:
		return nil, fmt.Errorf("%w: Policy %q is not %q or %q", ErrInvalidConfig, cfg.Policy, PolicyNone, PolicyStatic)
	}
	if len(cfg.Machine) == 0 {
		return nil, fmt.Errorf("%w: Machine is required for the Static policy", ErrInvalidConfig)
	}
	if len(cfg.ReservedMemory) == 0 {
		return nil, fmt.Errorf("%w: ReservedMemory: the Static policy needs the system reserved memory", ErrInvalidConfig)
	}
	if err := ValidateReservedMemory(cfg.Machine, cfg.NodeAllocatableReservation, cfg.ReservedMemory); err != nil {
		return nil, fmt.Errorf("%w: ReservedMemory: %w", ErrInvalidConfig, err)
	}
	for _, n := range cfg.Machine {
		if _, dup := m.allocatable[n.ID]; dup {
			return nil, fmt.Errorf("%w: Machine lists NUMA node %d twice", ErrInvalidConfig, n.ID)
		}
		m.allocatable[n.ID] = maps.Clone(n.Capacity)
		m.nodeIDs = append(m.nodeIDs, n.ID)
	}
	sort.Ints(m.nodeIDs)
	for _, r := range cfg.ReservedMemory {
		for name, q := range r.Limits {
			v := q.Value()
			have := m.allocatable[r.NUMANode][name]
			if v < 0 || uint64(v) > have {
				return nil, fmt.Errorf("%w: ReservedMemory: %s %s on NUMA node %d exceeds its capacity %d", ErrInvalidConfig, q.String(), name, r.NUMANode, have)
			}
			m.allocatable[r.NUMANode][name] = have - uint64(v)
		}
	}
	return m, nil
}

// stateFile is the checkpoint's JSON.
type stateFile struct {
	PolicyName string                        `json:"policyName"`
	Entries    map[string]map[string][]Block `json:"entries,omitempty"`
}

func decodeState(b []byte) (string, map[string]map[string][]Block, error) {
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return "", nil, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if dec.More() {
		return "", nil, fmt.Errorf("%w: trailing data", ErrCorruptState)
	}
	if f.Entries == nil {
		f.Entries = map[string]map[string][]Block{}
	}
	return f.PolicyName, f.Entries, nil
}

// used sums the memory held per node and resource; a multi-node block is
// charged to its nodes in order, each up to its allocatable amount.
func (m *Manager) used(entries map[string]map[string][]Block) (map[int]map[v1.ResourceName]uint64, error) {
	used := map[int]map[v1.ResourceName]uint64{}
	for _, id := range m.nodeIDs {
		used[id] = map[v1.ResourceName]uint64{}
	}
	for uid, ctrs := range entries {
		for name, blocks := range ctrs {
			for _, b := range blocks {
				left := b.Size
				for _, n := range b.NUMAAffinity {
					if _, ok := used[n]; !ok {
						return nil, fmt.Errorf("%w: pod %s container %s: unknown NUMA node %d", ErrCorruptState, uid, name, n)
					}
					free := m.allocatable[n][b.Type] - min(used[n][b.Type], m.allocatable[n][b.Type])
					take := min(left, free)
					used[n][b.Type] += take
					left -= take
				}
				if left > 0 || len(b.NUMAAffinity) == 0 {
					return nil, fmt.Errorf("%w: pod %s container %s: %d bytes of %s do not fit NUMA nodes %v", ErrCorruptState, uid, name, b.Size, b.Type, b.NUMAAffinity)
				}
			}
		}
	}
	return used, nil
}

// Start loads the checkpoint; a corrupt, foreign or impossible one is set
// aside as memory_manager_state.corrupt and the state starts empty. It is
// StartWithActivePods without pods to rebuild from.
func (m *Manager) Start(ctx context.Context) error {
	return m.StartWithActivePods(ctx, nil)
}

// StartWithActivePods loads the checkpoint. A corrupt, foreign or
// impossible one is set aside as memory_manager_state.corrupt (logged as
// an error, never a refusal to start); then, as when the file is missing,
// the Static policy rebuilds the state from activePods(): the Guaranteed
// pods are accounted again, oldest first (creation time, then UID), as
// admission would (on a single-NUMA machine all on node 0); a pod that no
// longer fits is left out and logged. The NUMA nodes do not reach the
// runtime (no cpuset.mems), so the accounting is the only record and
// re-accounting loses nothing real. The state is written before Start
// returns. Nil activePods rebuilds nothing.
func (m *Manager) StartWithActivePods(ctx context.Context, activePods func() []*v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName)
	var entries map[string]map[string][]Block
	if err == nil {
		var policy string
		policy, entries, err = decodeState(b)
		if err == nil && policy != m.cfg.Policy {
			err = fmt.Errorf("%w: written by policy %q, configured is %q", ErrCorruptState, policy, m.cfg.Policy)
		}
		if err == nil && m.cfg.Policy == PolicyNone && len(entries) > 0 {
			err = fmt.Errorf("%w: the None policy holds no memory", ErrCorruptState)
		}
		if err == nil && m.cfg.Policy == PolicyStatic {
			_, err = m.used(entries)
		}
		if err == nil {
			m.entries, m.started = entries, true
			return nil
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, ErrCorruptState) || errors.Is(err, checkpoint.ErrCorrupt) || errors.Is(err, checkpoint.ErrTooLarge):
		moved, aerr := checkpoint.SetAsideFS(m.fs, m.cfg.StateDir, StateFileName)
		m.cfg.Logger.Error("memory manager checkpoint is unusable: set aside, rebuilding the state from the active pods",
			zap.Error(err), zap.String("setAside", moved), zap.NamedError("setAsideError", aerr))
		if aerr != nil && moved == "" {
			return fmt.Errorf("memorymanager: set aside the corrupt checkpoint: %w", aerr)
		}
	default:
		return fmt.Errorf("memorymanager: read checkpoint: %w", err)
	}
	fresh := map[string]map[string][]Block{}
	if m.cfg.Policy == PolicyStatic && activePods != nil {
		fresh = m.rebuild(activePods())
	}
	if err := m.persist(fresh); err != nil {
		return err
	}
	m.entries, m.started = fresh, true
	return nil
}

// rebuild accounts the Guaranteed pods among pods again, oldest first,
// each all or nothing.
func (m *Manager) rebuild(pods []*v1.Pod) map[string]map[string][]Block {
	pods = slices.DeleteFunc(slices.Clone(pods), func(p *v1.Pod) bool { return p == nil })
	sort.SliceStable(pods, func(i, j int) bool {
		ti, tj := pods[i].CreationTimestamp, pods[j].CreationTimestamp
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return pods[i].UID < pods[j].UID
	})
	entries := map[string]map[string][]Block{}
	for _, pod := range pods {
		if _, done := entries[string(pod.UID)]; done {
			continue
		}
		next := cloneEntries(entries)
		var err error
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				if _, err = m.allocateInto(next, pod, &cs[i]); err != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			m.cfg.Logger.Warn("rebuild: pod's memory not accounted again", zap.String("pod", pod.Namespace+"/"+pod.Name),
				zap.String("podUID", string(pod.UID)), zap.Error(err))
			continue
		}
		if len(next[string(pod.UID)]) > 0 {
			m.cfg.Logger.Info("rebuild: pod's memory accounted again", zap.String("pod", pod.Namespace+"/"+pod.Name),
				zap.String("podUID", string(pod.UID)))
		}
		entries = next
	}
	return entries
}

func (m *Manager) persist(entries map[string]map[string][]Block) error {
	f := stateFile{PolicyName: m.cfg.Policy}
	if len(entries) > 0 {
		f.Entries = entries
	}
	data, _ := json.Marshal(f)
	err := checkpoint.WriteFS(m.fs, m.cfg.StateDir, StateFileName, data)
	if err == nil {
		return nil
	}
	if got, rerr := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName); rerr == nil && bytes.Equal(got, data) {
		m.cfg.Logger.Warn("memory manager checkpoint written, but its durability is unknown", zap.Error(err))
		return nil
	}
	return fmt.Errorf("memorymanager: write checkpoint: %w", err)
}

// containerRequest is the memory and hugepages a container of a Guaranteed
// pod asks for (limits; requests equal them), or nil for other pods.
func containerRequest(pod *v1.Pod, c *v1.Container) map[v1.ResourceName]uint64 {
	guaranteed := true
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				lim, ok := cs[i].Resources.Limits[r]
				if !ok || lim.IsZero() {
					guaranteed = false
				} else if req, ok := cs[i].Resources.Requests[r]; ok && req.Cmp(lim) != 0 {
					guaranteed = false
				}
			}
		}
	}
	if !guaranteed {
		return nil
	}
	out := map[v1.ResourceName]uint64{}
	for name, q := range c.Resources.Limits {
		if isMemoryResource(name) && q.Sign() > 0 {
			out[name] = uint64(q.Value())
		}
	}
	return out
}

// allocateInto finds the smallest group of NUMA nodes (fewest nodes, then
// lowest ids) that can hold the request, where each node is unused or used
// only by allocations over that same group, and records the blocks.
func (m *Manager) allocateInto(entries map[string]map[string][]Block, pod *v1.Pod, c *v1.Container) (bool, error) {
	req := containerRequest(pod, c)
	uid := string(pod.UID)
	if len(req) == 0 {
		return false, nil
	}
	if _, ok := entries[uid][c.Name]; ok {
		return false, nil
	}
	used, err := m.used(entries)
	if err != nil {
		return false, err
	}
	groupOf := map[int]string{} // node -> key of the group its allocations span
	for _, ctrs := range entries {
		for _, blocks := range ctrs {
			for _, b := range blocks {
				for _, n := range b.NUMAAffinity {
					groupOf[n] = fmt.Sprint(b.NUMAAffinity)
				}
			}
		}
	}
	fits := func(group []int) bool {
		key := fmt.Sprint(group)
		for _, n := range group {
			if g, ok := groupOf[n]; ok && g != key {
				return false
			}
		}
		for name, want := range req {
			var free uint64
			for _, n := range group {
				free += m.allocatable[n][name] - min(used[n][name], m.allocatable[n][name])
			}
			if free < want {
				return false
			}
		}
		return true
	}
	var found []int
	for k := 1; k <= len(m.nodeIDs) && found == nil; k++ {
		combinations(m.nodeIDs, k, func(g []int) bool {
			if fits(g) {
				found = slices.Clone(g)
				return false
			}
			return true
		})
	}
	if found == nil {
		return false, fmt.Errorf("container %q of pod %s/%s: %w", c.Name, pod.Namespace, pod.Name, ErrNoFit)
	}
	var blocks []Block
	for _, name := range slices.Sorted(maps.Keys(req)) {
		blocks = append(blocks, Block{NUMAAffinity: found, Type: name, Size: req[name]})
	}
	if entries[uid] == nil {
		entries[uid] = map[string][]Block{}
	}
	entries[uid][c.Name] = blocks
	return true, nil
}

// combinations calls f with each k-subset of ids in lexicographic order
// until f returns false. At most 100000 subsets are tried.
func combinations(ids []int, k int, f func([]int) bool) {
	idx := make([]int, k)
	for i := range idx {
		idx[i] = i
	}
	g := make([]int, k)
	for tries := 0; tries < 100000; tries++ {
		for i, j := range idx {
			g[i] = ids[j]
		}
		if !f(g) {
			return
		}
		i := k - 1
		for i >= 0 && idx[i] == len(ids)-k+i {
			i--
		}
		if i < 0 {
			return
		}
		idx[i]++
		for j := i + 1; j < k; j++ {
			idx[j] = idx[j-1] + 1
		}
	}
}

func cloneEntries(e map[string]map[string][]Block) map[string]map[string][]Block {
	out := make(map[string]map[string][]Block, len(e))
	for uid, ctrs := range e {
		out[uid] = maps.Clone(ctrs)
	}
	return out
}

// AllocatePod accounts the memory of every container of a Guaranteed pod,
// all or nothing, with one checkpoint write before it returns nil. A
// repeat is a no-op; no fit wraps ErrNoFit.
func (m *Manager) AllocatePod(pod *v1.Pod) error {
	if m.cfg.Policy != PolicyStatic || pod == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	next := cloneEntries(m.entries)
	changed := false
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			ch, err := m.allocateInto(next, pod, &cs[i])
			if err != nil {
				return err
			}
			changed = changed || ch
		}
	}
	if !changed {
		return nil
	}
	if err := m.persist(next); err != nil {
		return err
	}
	m.entries = next
	return nil
}

// Admit allocates the pod (AllocatePod) and rejects it on failure with the
// kubelet's reason; see the cpumanager package for the sync loop adapter.
func (m *Manager) Admit(pod *v1.Pod, _ []*v1.Pod) (ok bool, reason, message string) {
	if err := m.AllocatePod(pod); err != nil {
		return false, AdmitReason, fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)
	}
	return true, "", ""
}

// RemovePod releases the pod's memory (one checkpoint write).
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return ErrNotStarted
	}
	if _, ok := m.entries[podUID]; !ok {
		return nil
	}
	next := cloneEntries(m.entries)
	delete(next, podUID)
	if err := m.persist(next); err != nil {
		return err
	}
	m.entries = next
	return nil
}

// Blocks returns the memory a container holds (nil if none).
func (m *Manager) Blocks(podUID, containerName string) []Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.entries[podUID][containerName])
}

// Free returns the unallocated memory per NUMA node and resource.
func (m *Manager) Free() map[int]map[v1.ResourceName]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	used, _ := m.used(m.entries)
	out := map[int]map[v1.ResourceName]uint64{}
	for _, n := range m.nodeIDs {
		out[n] = map[v1.ResourceName]uint64{}
		for name, a := range m.allocatable[n] {
			out[n][name] = a - min(used[n][name], a)
		}
	}
	return out
}
