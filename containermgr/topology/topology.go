package topology

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

// CPU describes one logical CPU (hardware thread).
type CPU struct {
	// ID is the logical CPU number (cpuN in sysfs).
	ID int
	// Core identifies the physical core: the lowest ID among the core's
	// threads, so it is unique across sockets (sysfs core_id is not).
	Core int
	// Socket is the physical package id.
	Socket int
	// NUMANode is the NUMA node the CPU belongs to.
	NUMANode int
}

// Topology is an immutable description of a machine's CPUs. It is safe
// for concurrent use.
type Topology struct {
	cpus []CPU // sorted by ID
	// index[id] is the position of CPU id in cpus, -1 if absent.
	index []int
	all   cpuset.CPUSet

	cores, sockets, numa []int // sorted ids
	inCore               map[int][]int
	inSocket             map[int][]int
	inNUMA               map[int][]int
}

// New builds a Topology from a list of CPUs (in any order). Every thread of
// a core must be on the same socket and NUMA node; ids must be unique,
// non-negative, and CPU ids at most MaxCPUID.
func New(cpus []CPU) (*Topology, error) {
	if len(cpus) == 0 {
		return nil, fmt.Errorf("%w: no CPUs", ErrInvalidTopology)
	}
	if len(cpus) > MaxCPUID+1 {
		return nil, fmt.Errorf("%w: %d CPUs, limit %d", ErrInvalidTopology, len(cpus), MaxCPUID+1)
	}
	t := &Topology{
		cpus:     slices.Clone(cpus),
		inCore:   map[int][]int{},
		inSocket: map[int][]int{},
		inNUMA:   map[int][]int{},
	}
	slices.SortFunc(t.cpus, func(a, b CPU) int { return a.ID - b.ID })
	maxID := t.cpus[len(t.cpus)-1].ID
	if t.cpus[0].ID < 0 || maxID > MaxCPUID {
		return nil, fmt.Errorf("%w: cpu ids must be in [0, %d]", ErrInvalidTopology, MaxCPUID)
	}
	t.index = make([]int, maxID+1)
	for i := range t.index {
		t.index[i] = -1
	}
	coreHome := map[int]CPU{}
	ids := make([]int, 0, len(t.cpus))
	for i, c := range t.cpus {
		if c.Core < 0 || c.Socket < 0 || c.NUMANode < 0 {
			return nil, fmt.Errorf("%w: cpu %d has a negative core, socket or NUMA id", ErrInvalidTopology, c.ID)
		}
		if t.index[c.ID] >= 0 {
			return nil, fmt.Errorf("%w: cpu %d listed twice", ErrInvalidTopology, c.ID)
		}
		t.index[c.ID] = i
		if h, ok := coreHome[c.Core]; ok && (h.Socket != c.Socket || h.NUMANode != c.NUMANode) {
			return nil, fmt.Errorf("%w: core %d spans sockets or NUMA nodes (cpus %d and %d)", ErrInvalidTopology, c.Core, h.ID, c.ID)
		}
		coreHome[c.Core] = c
		t.inCore[c.Core] = append(t.inCore[c.Core], c.ID)
		t.inSocket[c.Socket] = append(t.inSocket[c.Socket], c.ID)
		t.inNUMA[c.NUMANode] = append(t.inNUMA[c.NUMANode], c.ID)
		ids = append(ids, c.ID)
	}
	t.all = cpuset.New(ids...)
	t.cores = sortedKeys(t.inCore)
	t.sockets = sortedKeys(t.inSocket)
	t.numa = sortedKeys(t.inNUMA)
	return t, nil
}

func sortedKeys(m map[int][]int) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Synthetic builds a regular machine: sockets × coresPerSocket cores with
// threadsPerCore threads each, every socket split into numaPerSocket NUMA
// nodes of consecutive cores. CPUs are numbered as Linux usually does on
// x86: first thread of every core (socket by socket), then the second
// thread of every core, and so on; so with 2 sockets of 4 cores and 2
// threads, core 0 holds CPUs 0 and 8.
func Synthetic(sockets, coresPerSocket, threadsPerCore, numaPerSocket int) (*Topology, error) {
	if sockets < 1 || coresPerSocket < 1 || threadsPerCore < 1 || numaPerSocket < 1 {
		return nil, fmt.Errorf("%w: sockets, cores, threads and NUMA nodes per socket must be at least 1", ErrInvalidTopology)
	}
	if coresPerSocket%numaPerSocket != 0 {
		return nil, fmt.Errorf("%w: %d cores per socket do not split into %d NUMA nodes", ErrInvalidTopology, coresPerSocket, numaPerSocket)
	}
	// Bound before multiplying into an allocation size.
	if sockets > MaxCPUID+1 || coresPerSocket > MaxCPUID+1 || threadsPerCore > MaxCPUID+1 ||
		sockets*coresPerSocket > MaxCPUID+1 || sockets*coresPerSocket*threadsPerCore > MaxCPUID+1 {
		return nil, fmt.Errorf("%w: more than %d CPUs", ErrInvalidTopology, MaxCPUID+1)
	}
	physical := sockets * coresPerSocket
	coresPerNUMA := coresPerSocket / numaPerSocket
	cpus := make([]CPU, 0, physical*threadsPerCore)
	for th := 0; th < threadsPerCore; th++ {
		for s := 0; s < sockets; s++ {
			for c := 0; c < coresPerSocket; c++ {
				phys := s*coresPerSocket + c
				cpus = append(cpus, CPU{
					ID:       th*physical + phys,
					Core:     phys,
					Socket:   s,
					NUMANode: s*numaPerSocket + c/coresPerNUMA,
				})
			}
		}
	}
	return New(cpus)
}

// sysfs layout, relative to the root given to Discover.
const (
	cpuDir       = "sys/devices/system/cpu"
	nodeDir      = "sys/devices/system/node"
	maxSysfsFile = 64 << 10
)

// Discover reads the topology of the online CPUs from sysfs under root
// ("" or "/" for the real machine; a temp dir in tests):
// sys/devices/system/cpu/online, cpu<N>/topology/{physical_package_id,core_id}
// and sys/devices/system/node/node<N>/cpulist. A machine without NUMA
// information puts every CPU on node 0; a physical_package_id of -1 (some
// virtual machines) counts as socket 0.
func Discover(root string) (*Topology, error) {
	if root == "" {
		root = "/"
	}
	online, err := readCPUSetFile(filepath.Join(root, cpuDir, "online"))
	if err != nil {
		return nil, err
	}
	if online.IsEmpty() {
		return nil, fmt.Errorf("%w: no online CPUs", ErrInvalidTopology)
	}
	numaOf := map[int]int{}
	nodes, _ := filepath.Glob(filepath.Join(root, nodeDir, "node[0-9]*"))
	for _, n := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "node"))
		if err != nil || id < 0 || id > MaxCPUID {
			continue
		}
		set, err := readCPUSetFile(filepath.Join(n, "cpulist"))
		if err != nil {
			return nil, err
		}
		for _, c := range set.UnsortedList() {
			numaOf[c] = id
		}
	}
	type coreKey struct{ socket, core int }
	coreFirst := map[coreKey]int{}
	cpus := make([]CPU, 0, online.Size())
	coreKeys := make([]coreKey, 0, online.Size())
	for _, id := range online.List() {
		dir := filepath.Join(root, cpuDir, "cpu"+strconv.Itoa(id), "topology")
		socket, err := readIntFile(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return nil, err
		}
		if socket < 0 {
			socket = 0
		}
		core, err := readIntFile(filepath.Join(dir, "core_id"))
		if err != nil {
			return nil, err
		}
		k := coreKey{socket, core}
		if _, ok := coreFirst[k]; !ok {
			coreFirst[k] = id // ids ascend, so the first seen is the lowest
		}
		cpus = append(cpus, CPU{ID: id, Socket: socket, NUMANode: numaOf[id]})
		coreKeys = append(coreKeys, k)
	}
	for i := range cpus {
		cpus[i].Core = coreFirst[coreKeys[i]]
	}
	return New(cpus)
}

func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidTopology, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSysfsFile+1))
	if err != nil {
		return "", fmt.Errorf("%w: read %s: %w", ErrInvalidTopology, path, err)
	}
	if len(b) > maxSysfsFile {
		return "", fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidTopology, path, maxSysfsFile)
	}
	return strings.TrimSpace(string(b)), nil
}

func readCPUSetFile(path string) (cpuset.CPUSet, error) {
	s, err := readSmall(path)
	if err != nil {
		return cpuset.New(), err
	}
	set, err := ParseCPUSet(s)
	if err != nil {
		return cpuset.New(), fmt.Errorf("%w: %s: %w", ErrInvalidTopology, path, err)
	}
	return set, nil
}

func readIntFile(path string) (int, error) {
	s, err := readSmall(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < -1 || v > 1<<20 {
		return 0, fmt.Errorf("%w: %s: bad number %q", ErrInvalidTopology, path, s)
	}
	return v, nil
}

// CPUs returns every CPU, sorted by ID (a copy).
func (t *Topology) CPUs() []CPU { return slices.Clone(t.cpus) }

// CPU returns the description of CPU id.
func (t *Topology) CPU(id int) (CPU, bool) {
	if id < 0 || id >= len(t.index) || t.index[id] < 0 {
		return CPU{}, false
	}
	return t.cpus[t.index[id]], true
}

// MaxID is the largest CPU id.
func (t *Topology) MaxID() int { return t.cpus[len(t.cpus)-1].ID }

// All is the set of every CPU.
func (t *Topology) All() cpuset.CPUSet { return t.all.Clone() }

// NumCPUs, NumCores, NumSockets and NumNUMANodes count the machine's parts.
func (t *Topology) NumCPUs() int      { return len(t.cpus) }
func (t *Topology) NumCores() int     { return len(t.cores) }
func (t *Topology) NumSockets() int   { return len(t.sockets) }
func (t *Topology) NumNUMANodes() int { return len(t.numa) }

// CPUsPerCore is the number of threads per core (of the first core; a
// machine with a mix reports the first one's).
func (t *Topology) CPUsPerCore() int { return len(t.inCore[t.cores[0]]) }

// CPUsPerSocket is NumCPUs / NumSockets.
func (t *Topology) CPUsPerSocket() int { return len(t.cpus) / len(t.sockets) }

// Cores, Sockets and NUMANodes list the ids, ascending (copies).
func (t *Topology) Cores() []int     { return slices.Clone(t.cores) }
func (t *Topology) Sockets() []int   { return slices.Clone(t.sockets) }
func (t *Topology) NUMANodes() []int { return slices.Clone(t.numa) }

// CPUsInCore, CPUsInSocket and CPUsInNUMANode list the CPU ids of one
// core, socket or NUMA node, ascending (nil if unknown; do not modify).
func (t *Topology) CPUsInCore(core int) []int     { return t.inCore[core] }
func (t *Topology) CPUsInSocket(socket int) []int { return t.inSocket[socket] }
func (t *Topology) CPUsInNUMANode(node int) []int { return t.inNUMA[node] }

// String summarises the topology.
func (t *Topology) String() string {
	return fmt.Sprintf("%d CPUs, %d cores, %d sockets, %d NUMA nodes", t.NumCPUs(), t.NumCores(), t.NumSockets(), t.NumNUMANodes())
}
