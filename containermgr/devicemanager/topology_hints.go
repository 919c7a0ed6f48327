package devicemanager

import (
	"math/bits"
	"sort"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// maxHintNUMANodes bounds the NUMA nodes hints are computed over (2^n
// sets are tried).
const maxHintNUMANodes = 16

// TopologyHints returns, per device resource the container asks for, the
// NUMA node sets its request can be met from, as the kubelet's device
// manager does for the topology manager: every set holding enough
// healthy devices that are free (or already the container's), Preferred
// when it is as small as the smallest set that could hold the request
// from all healthy devices. A resource whose devices report no NUMA
// affinity has a nil list (no preference); an empty list means the
// request cannot be met. A container that already holds its devices gets
// the hints of those devices.
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topology.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string][]topology.Hint{}
	names := make([]string, 0, len(c.Resources.Limits))
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, res := range names {
		q := c.Resources.Limits[v1.ResourceName(res)]
		need := int(q.Value())
		r := m.resources[res]
		if need <= 0 || r == nil {
			continue
		}
		if !hasTopology(r) {
			out[res] = nil
			continue
		}
		var candidates []*pluginapi.Device
		if a := m.alloc[string(pod.UID)][c.Name][res]; a != nil {
			if len(a.ids) != need {
				out[res] = []topology.Hint{}
				continue
			}
			for _, id := range a.ids {
				if d := r.devices[id]; d != nil {
					candidates = append(candidates, d)
				}
			}
		} else {
			inUse := m.inUseLocked(res)
			for id, d := range r.devices {
				if d.Health == pluginapi.Healthy && !inUse[id] {
					candidates = append(candidates, d)
				}
			}
		}
		var healthy []*pluginapi.Device
		for _, d := range r.devices {
			if d.Health == pluginapi.Healthy {
				healthy = append(healthy, d)
			}
		}
		out[res] = hintsFor(numaNodes(r), healthy, candidates, need)
	}
	return out
}

func hasTopology(r *resourceState) bool {
	for _, d := range r.devices {
		if len(d.GetTopology().GetNodes()) > 0 {
			return true
		}
	}
	return false
}

// numaNodes lists the NUMA node IDs the resource's devices name.
func numaNodes(r *resourceState) []int {
	seen := map[int]bool{}
	for _, d := range r.devices {
		for _, n := range d.GetTopology().GetNodes() {
			if n.GetID() >= 0 && n.GetID() < 1<<20 {
				seen[int(n.GetID())] = true
			}
		}
	}
	out := make([]int, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// inSet counts the devices with a NUMA node in the set (bit i: nodes[i]).
func inSet(devs []*pluginapi.Device, index map[int]int, set uint32) int {
	n := 0
	for _, d := range devs {
		for _, node := range d.GetTopology().GetNodes() {
			if i, ok := index[int(node.GetID())]; ok && set&(1<<i) != 0 {
				n++
				break
			}
		}
	}
	return n
}

func hintsFor(nodes []int, healthy, candidates []*pluginapi.Device, need int) []topology.Hint {
	if len(nodes) > maxHintNUMANodes {
		return nil
	}
	index := make(map[int]int, len(nodes))
	for i, n := range nodes {
		index[n] = i
	}
	minSize := len(nodes) + 1
	hints := []topology.Hint{}
	var sets []uint32
	for set := uint32(1); set < 1<<len(nodes); set++ {
		size := bits.OnesCount32(set)
		if inSet(healthy, index, set) >= need && size < minSize {
			minSize = size
		}
		if inSet(candidates, index, set) >= need {
			sets = append(sets, set)
		}
	}
	for _, set := range sets {
		h := topology.Hint{Preferred: bits.OnesCount32(set) == minSize}
		for i, n := range nodes {
			if set&(1<<i) != 0 {
				h.NUMANodes = append(h.NUMANodes, n)
			}
		}
		hints = append(hints, h)
	}
	return hints
}
