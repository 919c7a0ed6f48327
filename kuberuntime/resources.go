package kuberuntime

import (
	"github.com/nodekit/nodekit/internal/qos"
	"github.com/nodekit/nodekit/kubetypes"

	"fmt"
	"math"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CPU and OOM constants, as the kubelet uses them on Linux.
const (
	minCPUShares     = 2
	maxCPUShares     = 262144
	sharesPerCPU     = 1024
	milliCPUPerCPU   = 1000
	cpuQuotaPeriod   = 100000 // µs, 100ms
	minCPUQuota      = 1000   // µs, 1ms
	guaranteedOOMAdj = -997
	bestEffortOOMAdj = 1000

	// maxMilliCPU bounds the milli-CPU values used in arithmetic so that a
	// hostile quantity (1e18 cores) cannot overflow an int64 product.
	maxMilliCPU = int64(1) << 40

	// defaultMachineMemory is the memory capacity assumed for the Burstable
	// oom_score_adj formula when neither configBuilder.machineMemory nor
	// Config.NodeAllocatable tells it: 16 GiB, a common node size. The value
	// only shifts Burstable scores within [2, 999].
	defaultMachineMemory = int64(16) << 30

	// systemNodeCritical is the priority class of node-critical pods.
	systemNodeCritical = "system-node-critical"
)

// milliCPUToShares turns milli-CPUs into cgroup v1 cpu.shares: 1024 per CPU,
// rounded down, within [2, 262144]; 0 (no request) gives the minimum 2.
func milliCPUToShares(milliCPU int64) int64 {
	if milliCPU <= 0 {
		return minCPUShares
	}
	if milliCPU > maxMilliCPU {
		milliCPU = maxMilliCPU
	}
	shares := milliCPU * sharesPerCPU / milliCPUPerCPU
	if shares < minCPUShares {
		return minCPUShares
	}
	if shares > maxCPUShares {
		return maxCPUShares
	}
	return shares
}

// milliCPUToQuota turns a milli-CPU limit into a CFS quota for the period;
// 0 (no limit) gives 0 (unset), anything else at least 1ms.
func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU <= 0 {
		return 0
	}
	if milliCPU > maxMilliCPU {
		milliCPU = maxMilliCPU
	}
	quota := milliCPU * period / milliCPUPerCPU
	if quota < minCPUQuota {
		return minCPUQuota
	}
	return quota
}

// isQoSResource is true for the resources that decide a pod's QoS class.
func isQoSResource(name v1.ResourceName) bool {
	return name == v1.ResourceCPU || name == v1.ResourceMemory
}

// qosClass is the pod's QoS class (internal/qos).
func qosClass(pod *v1.Pod) v1.PodQOSClass { return qos.Class(pod) }

// isNodeCriticalPod: critical and of priority class system-node-critical.
func isNodeCriticalPod(pod *v1.Pod) bool {
	return kubetypes.IsCriticalPod(pod) && pod.Spec.PriorityClassName == systemNodeCritical
}

// isSidecar reports whether c is one of the pod's restartable init containers.
func isSidecar(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy == nil || *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// oomScoreAdj is the container's oom_score_adj, by QoS class:
// node-critical and Guaranteed -997, BestEffort 1000, Burstable
// 1000 - 1000*memRequest/memCapacity within [3, 999] (a sidecar never scores
// above the regular container with the smallest memory request).
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memCapacity int64) int64 {
	if isNodeCriticalPod(pod) {
		return guaranteedOOMAdj
	}
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMAdj
	case v1.PodQOSBestEffort:
		return bestEffortOOMAdj
	}
	if memCapacity <= 0 {
		memCapacity = defaultMachineMemory
	}
	score := func(req int64) int64 {
		if req < 0 {
			req = 0
		}
		if req > memCapacity {
			req = memCapacity
		}
		// req <= memCapacity keeps 1000*req below overflow for any
		// capacity under 9.2e15 bytes; use float for larger ones.
		if memCapacity > math.MaxInt64/1000 {
			return 1000 - int64(float64(req)*1000/float64(memCapacity))
		}
		return 1000 - (1000*req)/memCapacity
	}
	adj := score(c.Resources.Requests.Memory().Value())
	if isSidecar(pod, c) {
		minReq := int64(-1)
		for i := range pod.Spec.Containers {
			r := pod.Spec.Containers[i].Resources.Requests.Memory().Value()
			if minReq < 0 || r < minReq {
				minReq = r
			}
		}
		if minReq < 0 {
			minReq = 0
		}
		if m := score(minReq); adj > m {
			adj = m
		}
	}
	if adj < 1000+guaranteedOOMAdj {
		return 1000 + guaranteedOOMAdj
	}
	if adj == bestEffortOOMAdj {
		return adj - 1
	}
	return adj
}

// milliOf returns the bounded milli value of a quantity (0 for nil).
func milliOf(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	if q.Cmp(*resource.NewQuantity(maxMilliCPU/1000, resource.DecimalSI)) > 0 {
		return maxMilliCPU
	}
	m := q.MilliValue()
	if m < 0 {
		return 0
	}
	return m
}

// linuxResources computes shares, quota/period and memory limit from a CPU
// request (nil: take the limit), a CPU limit and a memory limit.
func linuxResources(cpuRequest, cpuLimit, memLimit *resource.Quantity) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	if cpuRequest == nil && cpuLimit != nil {
		r.CpuShares = milliCPUToShares(milliOf(cpuLimit))
	} else {
		r.CpuShares = milliCPUToShares(milliOf(cpuRequest))
	}
	if memLimit != nil {
		if v := memLimit.Value(); v > 0 {
			r.MemoryLimitInBytes = v
		}
	}
	r.CpuPeriod = cpuQuotaPeriod
	r.CpuQuota = milliCPUToQuota(milliOf(cpuLimit), cpuQuotaPeriod)
	return r
}

// podLevelSet reports whether the pod sets pod-level cpu or memory resources.
func podLevelSet(pod *v1.Pod) bool {
	if pod.Spec.Resources == nil {
		return false
	}
	for _, l := range []v1.ResourceList{pod.Spec.Resources.Requests, pod.Spec.Resources.Limits} {
		for name := range l {
			if isQoSResource(name) {
				return true
			}
		}
	}
	return false
}

// containerLinuxResources are the CRI resources of one container: shares from
// its cpu request (or limit), quota from its cpu limit (or the pod-level
// limit when it has none), memory limit likewise, oom_score_adj by QoS and the
// hugepage limits it asks for.
func containerLinuxResources(pod *v1.Pod, c *v1.Container, memCapacity int64) *runtimeapi.LinuxContainerResources {
	var cpuRequest *resource.Quantity
	if _, ok := c.Resources.Requests[v1.ResourceCPU]; ok {
		cpuRequest = c.Resources.Requests.Cpu()
	}
	cpuLimit, memLimit := c.Resources.Limits.Cpu(), c.Resources.Limits.Memory()
	if podLevelSet(pod) {
		if cpuLimit.IsZero() {
			cpuLimit = pod.Spec.Resources.Limits.Cpu()
		}
		if memLimit.IsZero() {
			memLimit = pod.Spec.Resources.Limits.Memory()
		}
	}
	r := linuxResources(cpuRequest, cpuLimit, memLimit)
	r.OomScoreAdj = oomScoreAdj(pod, c, memCapacity)
	var podLimits v1.ResourceList
	if podLevelSet(pod) {
		podLimits = pod.Spec.Resources.Limits
	}
	r.HugepageLimits = hugepageLimits(podLimits, c.Resources.Limits)
	return r
}

// hugepageLimits lists the hugepage limits asked for (container limits win
// over pod-level ones), keyed by the runtime's page-size names ("2MB", "1GB"),
// sorted by name. Unlike the kubelet it does not add a zero limit for every
// page size the host supports: that needs a read of /sys; a runtime applies
// no hugetlb limit for sizes not listed.
func hugepageLimits(lists ...v1.ResourceList) []*runtimeapi.HugepageLimit {
	got := map[string]uint64{}
	for _, l := range lists {
		for name, q := range l {
			if !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				continue
			}
			size, err := kubetypes.HugePageSize(name) // bounded: never a slow parse
			if err != nil {
				continue
			}
			unit, ok := pageSizeName(size)
			if !ok {
				continue
			}
			v := q.Value()
			if v < 0 {
				v = 0
			}
			got[unit] = uint64(v)
		}
	}
	if len(got) == 0 {
		return nil
	}
	out := make([]*runtimeapi.HugepageLimit, 0, len(got))
	for k, v := range got {
		out = append(out, &runtimeapi.HugepageLimit{PageSize: k, Limit: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PageSize < out[j].PageSize })
	return out
}

// pageSizeName writes a byte size in the largest unit that divides it
// (2097152 -> "2MB"), as runc names hugetlb page sizes.
func pageSizeName(size int64) (string, bool) {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for size%1024 == 0 && i < len(units)-1 {
		size /= 1024
		i++
	}
	if size > 1024 && i < len(units)-1 {
		return "", false
	}
	return fmt.Sprintf("%d%s", size, units[i]), true
}

// podRequestsLimits sums the cpu and memory requests and limits of a pod the
// way the scheduler and kubelet size a pod: pod-level resources when set;
// else the larger of (sum of regular containers + sidecars) and the largest
// init container (each init counted with the sidecars started before it).
// Limits are summed the same way over the containers that set them.
func podRequestsLimits(pod *v1.Pod) (req, lim v1.ResourceList) {
	req, lim = v1.ResourceList{}, v1.ResourceList{}
	sum := func(into v1.ResourceList, from v1.ResourceList) {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			q, ok := from[name]
			if !ok {
				continue
			}
			s := q.DeepCopy()
			if prev, ok := into[name]; ok {
				s.Add(prev)
			}
			into[name] = s
		}
	}
	maxInto := func(into v1.ResourceList, from v1.ResourceList) {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			q, ok := from[name]
			if !ok {
				continue
			}
			if prev, ok := into[name]; !ok || q.Cmp(prev) > 0 {
				into[name] = q.DeepCopy()
			}
		}
	}
	for _, pick := range []struct {
		into v1.ResourceList
		get  func(*v1.Container) v1.ResourceList
	}{
		{req, func(c *v1.Container) v1.ResourceList { return c.Resources.Requests }},
		{lim, func(c *v1.Container) v1.ResourceList { return c.Resources.Limits }},
	} {
		for i := range pod.Spec.Containers {
			sum(pick.into, pick.get(&pod.Spec.Containers[i]))
		}
		sidecars, initMax := v1.ResourceList{}, v1.ResourceList{}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				sum(pick.into, pick.get(c))
				sum(sidecars, pick.get(c))
				maxInto(initMax, sidecars)
				continue
			}
			tmp := v1.ResourceList{}
			sum(tmp, pick.get(c))
			sum(tmp, sidecars)
			maxInto(initMax, tmp)
		}
		maxInto(pick.into, initMax)
	}
	if podLevelSet(pod) {
		req, lim = v1.ResourceList{}, v1.ResourceList{}
		for name, q := range pod.Spec.Resources.Requests {
			if isQoSResource(name) {
				req[name] = q.DeepCopy()
			}
		}
		for name, q := range pod.Spec.Resources.Limits {
			if isQoSResource(name) {
				lim[name] = q.DeepCopy()
			}
		}
	}
	return req, lim
}

// sandboxResources are the pod-level resources put into
// LinuxPodSandboxConfig.Resources (overhead excluded).
func sandboxResources(pod *v1.Pod) *runtimeapi.LinuxContainerResources {
	req, lim := podRequestsLimits(pod)
	var cpuReq *resource.Quantity
	if _, ok := req[v1.ResourceCPU]; ok {
		cpuReq = req.Cpu()
	}
	return linuxResources(cpuReq, lim.Cpu(), lim.Memory())
}

// overheadResources is spec.overhead as LinuxPodSandboxConfig.Overhead
// (requests = limits); an empty resources message when there is none.
func overheadResources(pod *v1.Pod) *runtimeapi.LinuxContainerResources {
	if pod.Spec.Overhead == nil {
		return &runtimeapi.LinuxContainerResources{}
	}
	cpu := pod.Spec.Overhead.Cpu()
	return linuxResources(cpu, cpu, pod.Spec.Overhead.Memory())
}
