package containermgr

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Eviction signals that reserve node resources.
const (
	SignalMemoryAvailable = "memory.available"
	SignalNodeFsAvailable = "nodefs.available"
)

// EvictionThreshold is one hard eviction threshold ("signal < value"), as
// far as node allocatable needs it: an absolute Quantity, or a Percentage
// of capacity (0..1, float32 like the kubelet's, which decides the exact
// byte count).
type EvictionThreshold struct {
	Signal     string
	Quantity   *resource.Quantity
	Percentage float32
}

// thresholdResource maps a signal to the resource it reserves.
func thresholdResource(signal string) (v1.ResourceName, bool) {
	switch signal {
	case SignalMemoryAvailable:
		return v1.ResourceMemory, true
	case SignalNodeFsAvailable:
		return v1.ResourceEphemeralStorage, true
	}
	return "", false
}

// validateThreshold checks a threshold is usable.
func validateThreshold(t EvictionThreshold) error {
	if t.Quantity != nil {
		if t.Quantity.Sign() < 0 {
			return fmt.Errorf("threshold %s: negative quantity %s", t.Signal, t.Quantity.String())
		}
		return nil
	}
	p := float64(t.Percentage)
	if math.IsNaN(p) || p < 0 || p > 1 {
		return fmt.Errorf("threshold %s: percentage %v outside [0, 1]", t.Signal, t.Percentage)
	}
	return nil
}

// thresholdQuantity is the amount a threshold reserves of capacity: the
// quantity, else capacity times the float32 percentage computed in float64
// and truncated (so 5% of 10Gi is 536870920 bytes, not 536870912).
func thresholdQuantity(t EvictionThreshold, capacity resource.Quantity) resource.Quantity {
	if t.Quantity != nil {
		return t.Quantity.DeepCopy()
	}
	return *resource.NewQuantity(int64(float64(capacity.Value())*float64(t.Percentage)), resource.BinarySI)
}

// HardEvictionReservation is what the hard eviction thresholds hold back,
// per resource (memory.available → memory, nodefs.available →
// ephemeral-storage; other signals reserve nothing). A later threshold of
// the same signal replaces an earlier one.
func HardEvictionReservation(thresholds []EvictionThreshold, capacity v1.ResourceList) v1.ResourceList {
	if len(thresholds) == 0 {
		return nil
	}
	out := v1.ResourceList{}
	for _, t := range thresholds {
		rn, ok := thresholdResource(t.Signal)
		if !ok {
			continue
		}
		out[rn] = thresholdQuantity(t, capacity[rn])
	}
	return out
}

// Reservation is system-reserved + kube-reserved + hard eviction thresholds
// for every resource in capacity; zero amounts are left out.
func Reservation(capacity, systemReserved, kubeReserved v1.ResourceList, thresholds []EvictionThreshold) v1.ResourceList {
	ev := HardEvictionReservation(thresholds, capacity)
	out := v1.ResourceList{}
	for name := range capacity {
		v := resource.NewQuantity(0, resource.DecimalSI)
		for _, rl := range []v1.ResourceList{systemReserved, kubeReserved, ev} {
			if q, ok := rl[name]; ok {
				v.Add(q)
			}
		}
		if !v.IsZero() {
			out[name] = *v
		}
	}
	return out
}

// ValidateReservation returns ErrReservationExceedsCapacity naming every
// resource whose reservation is above its capacity.
func ValidateReservation(capacity, reservation v1.ResourceList) error {
	var bad []string
	for name, r := range reservation {
		c := capacity[name]
		if c.Cmp(r) < 0 {
			bad = append(bad, fmt.Sprintf("%s: reserved %s, capacity %s", name, r.String(), c.String()))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: %s", ErrReservationExceedsCapacity, strings.Join(bad, "; "))
	}
	return nil
}

// Allocatable is what node status reports as allocatable: capacity minus
// reservation, never below zero, and memory further reduced by the
// hugepages capacity (pre-allocated pages are not general memory).
func Allocatable(capacity, reservation v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		if r, ok := reservation[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	if mem, ok := out[v1.ResourceMemory]; ok {
		for name, c := range capacity {
			if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				mem.Sub(c)
			}
		}
		if mem.Sign() < 0 {
			mem.Set(0)
		}
		out[v1.ResourceMemory] = mem
	}
	return out
}

// EnforcedAllocatable is the limit put on the pods cgroup: capacity minus
// system-reserved and kube-reserved (eviction thresholds are left out so
// the eviction manager acts before the kernel OOM killer), never below zero.
func EnforcedAllocatable(capacity, systemReserved, kubeReserved v1.ResourceList) v1.ResourceList {
	out := make(v1.ResourceList, len(capacity))
	for name, c := range capacity {
		v := c.DeepCopy()
		if q, ok := systemReserved[name]; ok {
			v.Sub(q)
		}
		if q, ok := kubeReserved[name]; ok {
			v.Sub(q)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		out[name] = v
	}
	return out
}

// ResourceConfigForLimits turns resource amounts into cgroup values: cpu →
// shares, memory → limit, pid → pids limit, hugepages-<size> → hugetlb.
func ResourceConfigForLimits(rl v1.ResourceList) *ResourceConfig {
	if rl == nil {
		return nil
	}
	rc := &ResourceConfig{}
	if q, ok := rl[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &s
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		m := q.Value()
		rc.Memory = &m
	}
	if q, ok := rl[v1.ResourceName("pid")]; ok {
		p := q.Value()
		rc.PidsLimit = &p
	}
	for name, q := range rl {
		if !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			continue
		}
		ps, err := kubetypes.HugePageSize(name) // bounded: never a slow parse
		if err != nil {
			continue
		}
		if rc.HugePageLimit == nil {
			rc.HugePageLimit = map[int64]int64{}
		}
		rc.HugePageLimit[ps] = q.Value()
	}
	return rc
}

// maxMeminfo bounds how much of meminfo is read.
const maxMeminfo = 1 << 20

// MachineCapacity reads the node's cpu count (the CPUs this process may
// run on) and memory (MemTotal of <procRoot>/meminfo).
func MachineCapacity(procRoot string) (v1.ResourceList, error) {
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return nil, fmt.Errorf("reading machine memory: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 0, 4096)
	sc := bufio.NewScanner(f)
	sc.Buffer(buf, maxMeminfo)
	var mem int64 = -1
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("MemTotal:"))
		if !ok {
			continue
		}
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			return nil, fmt.Errorf("reading machine memory: bad MemTotal %q", string(rest))
		}
		mem = kb * 1024
		break
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading machine memory: %w", err)
	}
	if mem < 0 {
		return nil, fmt.Errorf("reading machine memory: no MemTotal in %s", filepath.Join(procRoot, "meminfo"))
	}
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI),
	}, nil
}
