package cpumanager

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// isGuaranteed reports whether the pod is of the Guaranteed QoS class:
// every container (init ones included) has cpu and memory limits, and any
// request it gives equals the limit. Pods with pod-level resources are not
// handled by the cpu manager (as in a kubelet without the
// PodLevelResourceManagers gate) and count as not Guaranteed here.
func isGuaranteed(pod *v1.Pod) bool {
	if pod.Spec.Resources != nil && (len(pod.Spec.Resources.Requests) > 0 || len(pod.Spec.Resources.Limits) > 0) {
		return false
	}
	n := 0
	check := func(c *v1.Container) bool {
		n++
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			lim, ok := c.Resources.Limits[r]
			if !ok || lim.IsZero() {
				return false
			}
			if req, ok := c.Resources.Requests[r]; ok && req.Cmp(lim) != 0 {
				return false
			}
		}
		return true
	}
	for i := range pod.Spec.InitContainers {
		if !check(&pod.Spec.InitContainers[i]) {
			return false
		}
	}
	for i := range pod.Spec.Containers {
		if !check(&pod.Spec.Containers[i]) {
			return false
		}
	}
	return n > 0
}

// maxCPURequest bounds the cpu request looked at, so a huge quantity is a
// plain shortage instead of an overflow.
const maxCPURequest = 1 << 20

// exclusiveCPUs is the number of exclusive CPUs a container gets: its cpu
// request (the limit when no request is given) if the pod is Guaranteed and
// the request is a whole number of CPUs, else 0 (the shared pool).
func exclusiveCPUs(pod *v1.Pod, c *v1.Container) int {
	if !isGuaranteed(pod) {
		return 0
	}
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok {
		q = c.Resources.Limits[v1.ResourceCPU]
	}
	if q.Sign() <= 0 {
		return 0
	}
	if q.Cmp(*resource.NewQuantity(maxCPURequest, resource.DecimalSI)) > 0 {
		return maxCPURequest
	}
	m := q.MilliValue()
	if m%1000 != 0 {
		return 0
	}
	return int(m / 1000)
}

// requestedCPUs is the container's cpu request (the limit when no request
// is given) as a number of CPUs, written in full.
func requestedCPUs(c *v1.Container) string {
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok {
		q = c.Resources.Limits[v1.ResourceCPU]
	}
	if v, ok := q.AsInt64(); ok {
		return strconv.FormatInt(v, 10)
	}
	return q.String()
}

func isRestartableInit(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// findContainer returns the container of the pod with that name and
// whether it is a (non-restartable) init container.
func findContainer(pod *v1.Pod, name string) (c *v1.Container, plainInit bool) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			ic := &pod.Spec.InitContainers[i]
			return ic, !isRestartableInit(ic)
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	return nil, false
}
