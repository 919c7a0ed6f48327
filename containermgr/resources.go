package containermgr

import (
	"github.com/nodekit/nodekit/internal/qos"
	"github.com/nodekit/nodekit/kubetypes"

	"strings"

	v1 "k8s.io/api/core/v1"
)

// Conversion constants (the kubelet's values).
const (
	// MinShares and MaxShares bound cpu.shares (cgroup v1).
	MinShares uint64 = 2
	MaxShares uint64 = 262144
	// SharesPerCPU is cpu.shares for one whole cpu.
	SharesPerCPU = 1024
	// DefaultCPUPeriod is the CFS period in microseconds (100ms).
	DefaultCPUPeriod uint64 = 100000
	// MinQuota is the smallest CFS quota set, in microseconds (1ms).
	MinQuota int64 = 1000
	// MaxWeight is the largest cgroup v2 cpu.weight.
	MaxWeight uint64 = 10000
)

// ResourceConfig is what is written into a cgroup. A nil field is left
// alone. -1 in CPUQuota, Memory or PidsLimit means unlimited.
type ResourceConfig struct {
	CPUShares *uint64 // v1 cpu.shares; v2 cpu.weight via CPUWeight
	CPUQuota  *int64  // microseconds per CPUPeriod
	CPUPeriod *uint64 // microseconds
	Memory    *int64  // bytes
	PidsLimit *int64
	// CPUSet, when not empty, is written to cpuset.cpus.
	CPUSet string
	// HugePageLimit maps a page size in bytes to a limit in bytes.
	HugePageLimit map[int64]int64
}

// MilliCPUToShares converts millicpu to cpu.shares: 1024 per cpu, clamped
// to [MinShares, MaxShares]; 0 (no request) gives MinShares.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU <= 0 {
		return MinShares
	}
	if milliCPU > int64(MaxShares)*1000/SharesPerCPU+1 {
		return MaxShares // also keeps the product below from overflowing
	}
	shares := uint64(milliCPU * SharesPerCPU / 1000)
	switch {
	case shares < MinShares:
		return MinShares
	case shares > MaxShares:
		return MaxShares
	}
	return shares
}

// MilliCPUToQuota converts a millicpu limit to a CFS quota over period (in
// microseconds): 0 for no limit, else at least MinQuota.
func MilliCPUToQuota(milliCPU int64, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	const maxMilli = 1 << 40 // a million cpus; keeps the product in range
	if milliCPU > maxMilli {
		milliCPU = maxMilli
	}
	if period <= 0 || period > 1000000 {
		period = int64(DefaultCPUPeriod)
	}
	quota := milliCPU * period / 1000
	if quota < MinQuota {
		return MinQuota
	}
	return quota
}

// CPUWeight maps cpu.shares to cgroup v2 cpu.weight linearly, [2, 262144]
// onto [1, 10000]: 1 + (shares-2)*9999/262142.
func CPUWeight(shares uint64) uint64 {
	switch {
	case shares <= MinShares:
		return 1
	case shares >= MaxShares:
		return MaxWeight
	}
	return 1 + (shares-MinShares)*(MaxWeight-1)/(MaxShares-MinShares)
}

// QOSClass is the pod's QoS class: status.qosClass when set, else computed
// from requests and limits as the API server does (pod-level resources when
// the pod sets them, else every init and regular container's cpu and
// memory). Guaranteed: everything limits cpu and memory and requests (when
// given) equal the limits; BestEffort: no cpu or memory request or limit
// anywhere; Burstable otherwise.
func QOSClass(pod *v1.Pod) v1.PodQOSClass { return qos.Class(pod) }

// podLevelSet reports whether the pod sets pod-level cpu or memory.
func podLevelSet(pod *v1.Pod) bool {
	r := pod.Spec.Resources
	if r == nil {
		return false
	}
	for _, rl := range []v1.ResourceList{r.Requests, r.Limits} {
		for name := range rl {
			if name == v1.ResourceCPU || name == v1.ResourceMemory {
				return true
			}
		}
	}
	return false
}

// podAmounts are a pod's effective cpu (millicpu) and memory (bytes)
// requests and limits, and hugepage limits, as the kubelet sizes a pod.
type podAmounts struct {
	cpuReq, memReq int64
	cpuLim, memLim int64
	hasCPULim      bool
	hasMemLim      bool
	// allCPULimits/allMemLimits: every container (init, sidecar, regular)
	// declares the limit, or the pod level does.
	allCPULimits, allMemLimits bool
	hugePages                  map[int64]int64
}

// amounts of one resource list: cpu milli, memory bytes.
func cpuMem(rl v1.ResourceList) (cpu, mem int64) {
	if q, ok := rl[v1.ResourceCPU]; ok {
		cpu = q.MilliValue()
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		mem = q.Value()
	}
	return cpu, mem
}

// effective folds containers the kubelet's way: regular containers and
// sidecars (restartable init containers) add up; each plain init container
// runs with the sidecars started before it; the pod needs the larger of the
// sum and the largest init step.
func effective(pod *v1.Pod, get func(*v1.Container) v1.ResourceList) (cpu, mem int64) {
	for i := range pod.Spec.Containers {
		c, m := cpuMem(get(&pod.Spec.Containers[i]))
		cpu, mem = cpu+c, mem+m
	}
	var sideCPU, sideMem, initCPU, initMem int64
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		c, m := cpuMem(get(ic))
		if ic.RestartPolicy != nil && *ic.RestartPolicy == v1.ContainerRestartPolicyAlways {
			cpu, mem = cpu+c, mem+m
			sideCPU, sideMem = sideCPU+c, sideMem+m
			c, m = sideCPU, sideMem
		} else {
			c, m = c+sideCPU, m+sideMem
		}
		initCPU, initMem = max(initCPU, c), max(initMem, m)
	}
	return max(cpu, initCPU), max(mem, initMem)
}

// amountsOf computes podAmounts, with the pod overhead added to the
// requests and to the limits that are set.
func amountsOf(pod *v1.Pod) podAmounts {
	var a podAmounts
	a.allCPULimits, a.allMemLimits = true, true
	reqs := func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }
	lims := func(c *v1.Container) v1.ResourceList {
		if q, ok := c.Resources.Limits[v1.ResourceCPU]; !ok || q.IsZero() {
			a.allCPULimits = false
		}
		if q, ok := c.Resources.Limits[v1.ResourceMemory]; !ok || q.IsZero() {
			a.allMemLimits = false
		}
		return c.Resources.Limits
	}
	a.cpuReq, a.memReq = effective(pod, reqs)
	a.cpuLim, a.memLim = effective(pod, lims)
	// A container that declares a limit counts; no container at all means no
	// limit declared.
	a.hasCPULim, a.hasMemLim = a.cpuLim > 0, a.memLim > 0
	a.hugePages = hugePagesOf(pod)
	if podLevelSet(pod) {
		r := pod.Spec.Resources
		if q, ok := r.Requests[v1.ResourceCPU]; ok {
			a.cpuReq = q.MilliValue()
		}
		if q, ok := r.Requests[v1.ResourceMemory]; ok {
			a.memReq = q.Value()
		}
		if q, ok := r.Limits[v1.ResourceCPU]; ok && !q.IsZero() {
			a.cpuLim, a.hasCPULim, a.allCPULimits = q.MilliValue(), true, true
		}
		if q, ok := r.Limits[v1.ResourceMemory]; ok && !q.IsZero() {
			a.memLim, a.hasMemLim, a.allMemLimits = q.Value(), true, true
		}
	}
	if oh := pod.Spec.Overhead; oh != nil {
		c, m := cpuMem(oh)
		a.cpuReq, a.memReq = a.cpuReq+c, a.memReq+m
		if a.hasCPULim {
			a.cpuLim += c
		}
		if a.hasMemLim {
			a.memLim += m
		}
	}
	return a
}

// hugePagesOf sums hugepages-<size> requests of the pod's containers
// (hugepages requests equal limits), keyed by page size in bytes.
func hugePagesOf(pod *v1.Pod) map[int64]int64 {
	var out map[int64]int64
	visit := func(rl v1.ResourceList) {
		for name, q := range rl {
			if !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				continue
			}
			ps, err := kubetypes.HugePageSize(name) // bounded: never a slow parse
			if err != nil {
				continue
			}
			if out == nil {
				out = map[int64]int64{}
			}
			out[ps] += q.Value()
		}
	}
	for i := range pod.Spec.Containers {
		visit(pod.Spec.Containers[i].Resources.Limits)
	}
	var initMax map[int64]int64
	for i := range pod.Spec.InitContainers {
		for name, q := range pod.Spec.InitContainers[i].Resources.Limits {
			if !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				continue
			}
			ps, err := kubetypes.HugePageSize(name) // bounded: never a slow parse
			if err != nil {
				continue
			}
			if initMax == nil {
				initMax = map[int64]int64{}
			}
			initMax[ps] = max(initMax[ps], q.Value())
		}
	}
	for s, v := range initMax {
		if out == nil {
			out = map[int64]int64{}
		}
		out[s] = max(out[s], v)
	}
	return out
}

// PodResourceOptions are the node settings that shape a pod's cgroup values.
type PodResourceOptions struct {
	// DisableCPUQuota leaves cpu limits unenforced (quota -1), like the
	// kubelet's --cpu-cfs-quota=false.
	DisableCPUQuota bool
	// CPUPeriod is the CFS period in microseconds; 0 means DefaultCPUPeriod.
	CPUPeriod uint64
	// PidsLimit is set on every pod cgroup when positive.
	PidsLimit int64
}

// ResourceConfigForPod computes the values of a pod's cgroup:
//   - Guaranteed: cpu shares from the requests, CFS quota and period from
//     the limits, memory limit.
//   - Burstable: cpu shares from the requests; quota and period only when
//     every container has a cpu limit; memory limit only when every
//     container has a memory limit.
//   - BestEffort: MinShares.
//
// Requests and limits follow the kubelet's effective rules (init containers,
// sidecars, pod-level resources) plus the pod overhead; the pids limit is set
// when positive; hugepage limits are carried.
func ResourceConfigForPod(pod *v1.Pod, opts PodResourceOptions) *ResourceConfig {
	rc := &ResourceConfig{}
	if pod == nil {
		s := MinShares
		rc.CPUShares = &s
		return rc
	}
	a := amountsOf(pod)
	period := opts.CPUPeriod
	if period == 0 {
		period = DefaultCPUPeriod
	}
	shares := MilliCPUToShares(a.cpuReq)
	quota := MilliCPUToQuota(a.cpuLim, int64(period))
	if opts.DisableCPUQuota {
		quota = -1
	}
	mem := a.memLim
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &mem
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if a.allCPULimits && a.hasCPULim {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if a.allMemLimits && a.hasMemLim {
			rc.Memory = &mem
		}
	default:
		s := MinShares
		rc.CPUShares = &s
	}
	if opts.PidsLimit > 0 {
		p := opts.PidsLimit
		rc.PidsLimit = &p
	}
	rc.HugePageLimit = a.hugePages
	return rc
}
