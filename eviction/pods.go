package eviction

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const ()

func podPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

// isBestEffort: no container (init included) requests or limits cpu or
// memory, and no pod-level resources.
func isBestEffort(pod *v1.Pod) bool {
	has := func(r v1.ResourceRequirements) bool {
		for _, l := range []v1.ResourceList{r.Requests, r.Limits} {
			for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
				if q, ok := l[n]; ok && !q.IsZero() {
					return true
				}
			}
		}
		return false
	}
	if pod.Spec.Resources != nil && has(*pod.Spec.Resources) {
		return false
	}
	for i := range pod.Spec.Containers {
		if has(pod.Spec.Containers[i].Resources) {
			return false
		}
	}
	for i := range pod.Spec.InitContainers {
		if has(pod.Spec.InitContainers[i].Resources) {
			return false
		}
	}
	return true
}

// podRequest is the pod's effective request of name, in its base unit: the
// pod-level request when set, else the larger of the sum over app and
// sidecar containers and any regular init container (plus the sidecars
// started before it); plus overhead.
func podRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	if pod.Spec.Resources != nil {
		if q, ok := pod.Spec.Resources.Requests[name]; ok {
			return q.Value() + overhead(pod, name)
		}
	}
	var sum int64
	for i := range pod.Spec.Containers {
		sum += reqOf(pod.Spec.Containers[i].Resources, name)
	}
	var sidecars, initMax int64
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := reqOf(c.Resources, name)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sidecars += r
			continue
		}
		initMax = max(initMax, sidecars+r)
	}
	return max(sum+sidecars, initMax) + overhead(pod, name)
}

func reqOf(r v1.ResourceRequirements, name v1.ResourceName) int64 {
	if q, ok := r.Requests[name]; ok {
		return q.Value()
	}
	return 0
}

func overhead(pod *v1.Pod, name v1.ResourceName) int64 {
	if q, ok := pod.Spec.Overhead[name]; ok {
		return q.Value()
	}
	return 0
}

// tolerates reports whether the pod tolerates key:effect (Exists or Equal
// with an empty value; an empty key with Exists tolerates everything).
func tolerates(pod *v1.Pod, key string, effect v1.TaintEffect) bool {
	for _, t := range pod.Spec.Tolerations {
		if t.Effect != "" && t.Effect != effect {
			continue
		}
		switch t.Operator {
		case v1.TolerationOpExists:
			if t.Key == "" || t.Key == key {
				return true
			}
		case v1.TolerationOpEqual, "":
			if t.Key == key && t.Value == "" {
				return true
			}
		}
	}
	return false
}

func binary(n int64) string { return resource.NewQuantity(n, resource.BinarySI).String() }
