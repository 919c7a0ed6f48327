package cpumanager

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// allocator picks CPUs the way the kubelet's packed takeByTopology does:
// whole NUMA nodes or sockets (the larger unit first) when the request
// covers one, then whole cores, then single threads, always preferring the
// groups with the fewest free CPUs so that allocations pack tightly.
//
// It works on dense indexes precomputed from the topology once.
type allocator struct {
	maxID int
	// per CPU id (-1 if the id is not in the topology)
	cpuCore []int
	// per core index
	coreCPUs [][]int
	coreA    []int // index of the core's first-level group
	coreB    []int // index of the core's second-level group
	coreID   []int
	// first level (NUMA nodes when they are at least as large as sockets,
	// else sockets) and second level (the other one)
	sizeA, sizeB []int
	idA, idB     []int
	// bsInA[a] lists the second-level groups that share cores with a, and
	// coresIn[a][j] the cores of a ∩ bsInA[a][j].
	bsInA   [][]int
	coresIn [][][]int
}

func newAllocator(t *topology.Topology) *allocator {
	numaFirst := t.NumSockets() >= t.NumNUMANodes()
	al := &allocator{maxID: t.MaxID()}
	al.cpuCore = make([]int, al.maxID+1)
	for i := range al.cpuCore {
		al.cpuCore[i] = -1
	}
	aIdx, bIdx := map[int]int{}, map[int]int{}
	dense := func(m map[int]int, ids *[]int, sizes *[]int, id int) int {
		if i, ok := m[id]; ok {
			return i
		}
		m[id] = len(*ids)
		*ids = append(*ids, id)
		*sizes = append(*sizes, 0)
		return m[id]
	}
	// Walk groups in ascending id order so dense indexes follow ids.
	var aIDs, bIDs []int
	if numaFirst {
		aIDs, bIDs = t.NUMANodes(), t.Sockets()
	} else {
		aIDs, bIDs = t.Sockets(), t.NUMANodes()
	}
	for _, id := range aIDs {
		dense(aIdx, &al.idA, &al.sizeA, id)
	}
	for _, id := range bIDs {
		dense(bIdx, &al.idB, &al.sizeB, id)
	}
	al.bsInA = make([][]int, len(al.idA))
	al.coresIn = make([][][]int, len(al.idA))
	for ci, core := range t.Cores() {
		cpus := t.CPUsInCore(core)
		first, _ := t.CPU(cpus[0])
		a, b := first.NUMANode, first.Socket
		if !numaFirst {
			a, b = first.Socket, first.NUMANode
		}
		ai, bi := aIdx[a], bIdx[b]
		al.coreCPUs = append(al.coreCPUs, cpus)
		al.coreA = append(al.coreA, ai)
		al.coreB = append(al.coreB, bi)
		al.coreID = append(al.coreID, core)
		al.sizeA[ai] += len(cpus)
		al.sizeB[bi] += len(cpus)
		for _, c := range cpus {
			al.cpuCore[c] = ci
		}
		j := slices.Index(al.bsInA[ai], bi)
		if j < 0 {
			al.bsInA[ai] = append(al.bsInA[ai], bi)
			al.coresIn[ai] = append(al.coresIn[ai], nil)
			j = len(al.bsInA[ai]) - 1
		}
		al.coresIn[ai][j] = append(al.coresIn[ai][j], ci)
	}
	return al
}

// accumulator is the state of one allocation.
type accumulator struct {
	al           *allocator
	free         []bool // per CPU id
	freeCore     []int
	freeA, freeB []int
	need         int
	result       []int
	order        []int
}

func (al *allocator) newAccumulator(available cpuset.CPUSet, need int) *accumulator {
	acc := &accumulator{
		al:       al,
		free:     make([]bool, al.maxID+1),
		freeCore: make([]int, len(al.coreCPUs)),
		freeA:    make([]int, len(al.idA)),
		freeB:    make([]int, len(al.idB)),
		need:     need,
	}
	for _, c := range available.UnsortedList() {
		if c < 0 || c > al.maxID || al.cpuCore[c] < 0 {
			continue
		}
		acc.free[c] = true
		ci := al.cpuCore[c]
		acc.freeCore[ci]++
		acc.freeA[al.coreA[ci]]++
		acc.freeB[al.coreB[ci]]++
	}
	return acc
}

func (acc *accumulator) take(c int) {
	ci := acc.al.cpuCore[c]
	acc.free[c] = false
	acc.freeCore[ci]--
	acc.freeA[acc.al.coreA[ci]]--
	acc.freeB[acc.al.coreB[ci]]--
	acc.result = append(acc.result, c)
	acc.need--
}

func (acc *accumulator) takeCore(ci int) {
	for _, c := range acc.al.coreCPUs[ci] {
		if acc.free[c] {
			acc.take(c)
		}
	}
}

// byFree sorts ids (dense indexes) by free count, then by real id.
func byFree(ids []int, free, realID []int) {
	slices.SortFunc(ids, func(x, y int) int {
		if free[x] != free[y] {
			return free[x] - free[y]
		}
		return realID[x] - realID[y]
	})
}

// sortedA lists the first-level groups with a free CPU, fewest free first.
func (acc *accumulator) sortedA() []int {
	acc.order = acc.order[:0]
	for a, n := range acc.freeA {
		if n > 0 {
			acc.order = append(acc.order, a)
		}
	}
	byFree(acc.order, acc.freeA, acc.al.idA)
	return acc.order
}

// walkCores calls f for every (second-level group, core) with a free CPU
// in the hierarchical order: first-level groups by free count, inside each
// the second-level groups by free count, inside those the cores by free
// count. f returning false stops the walk.
func (acc *accumulator) walkCores(f func(b, core int) bool) {
	as := slices.Clone(acc.sortedA())
	cores := []int{}
	for _, a := range as {
		idx := make([]int, 0, len(acc.al.bsInA[a]))
		for j := range acc.al.bsInA[a] {
			idx = append(idx, j)
		}
		bs := acc.al.bsInA[a]
		slices.SortFunc(idx, func(x, y int) int {
			bx, by := bs[x], bs[y]
			if acc.freeB[bx] != acc.freeB[by] {
				return acc.freeB[bx] - acc.freeB[by]
			}
			return acc.al.idB[bx] - acc.al.idB[by]
		})
		for _, j := range idx {
			cores = cores[:0]
			for _, ci := range acc.al.coresIn[a][j] {
				if acc.freeCore[ci] > 0 {
					cores = append(cores, ci)
				}
			}
			byFree(cores, acc.freeCore, acc.al.coreID)
			for _, ci := range cores {
				if !f(bs[j], ci) {
					return
				}
			}
		}
	}
}

func (acc *accumulator) takeFullA() {
	for _, a := range slices.Clone(acc.sortedA()) {
		if acc.freeA[a] == acc.al.sizeA[a] && acc.need >= acc.al.sizeA[a] {
			for ci, ca := range acc.al.coreA {
				if ca == a {
					acc.takeCore(ci)
				}
			}
		}
	}
}

func (acc *accumulator) takeFullB() {
	var bs []int
	acc.walkCores(func(b, _ int) bool {
		if !slices.Contains(bs, b) {
			bs = append(bs, b)
		}
		return true
	})
	for _, b := range bs {
		if acc.freeB[b] == acc.al.sizeB[b] && acc.need >= acc.al.sizeB[b] {
			for ci, cb := range acc.al.coreB {
				if cb == b {
					acc.takeCore(ci)
				}
			}
		}
	}
}

func (acc *accumulator) takeFullCores() {
	var cores []int
	acc.walkCores(func(_, ci int) bool { cores = append(cores, ci); return true })
	for _, ci := range cores {
		size := len(acc.al.coreCPUs[ci])
		if acc.freeCore[ci] == size && acc.need >= size {
			acc.takeCore(ci)
		}
	}
}

func (acc *accumulator) takeThreads() {
	var cores []int
	acc.walkCores(func(_, ci int) bool { cores = append(cores, ci); return true })
	for _, ci := range cores {
		for _, c := range acc.al.coreCPUs[ci] {
			if acc.need == 0 {
				return
			}
			if acc.free[c] {
				acc.take(c)
			}
		}
	}
}

// take returns n CPUs of available chosen by topology, or an error
// wrapping ErrNotEnoughCPUs.
func (al *allocator) take(available cpuset.CPUSet, n int) (cpuset.CPUSet, error) {
	if n <= 0 {
		return cpuset.New(), nil
	}
	acc := al.newAccumulator(available, n)
	have := 0
	for _, f := range acc.freeA {
		have += f
	}
	if n > have {
		return cpuset.New(), fmt.Errorf("%w to satisfy request: requested=%d, available=%d", ErrNotEnoughCPUs, n, have)
	}
	for _, step := range []func(){acc.takeFullA, acc.takeFullB, acc.takeFullCores, acc.takeThreads} {
		step()
		if acc.need == 0 {
			return cpuset.New(acc.result...), nil
		}
	}
	return cpuset.New(), fmt.Errorf("%w: %d of %d cpus taken", ErrNotEnoughCPUs, n-acc.need, n)
}
