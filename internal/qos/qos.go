package qos

import (
	v1 "k8s.io/api/core/v1"
)

// Class is the pod's QoS class: status.qosClass when set (the class of a pod
// never changes), else computed from its cpu and memory requests and limits
// as the API server does: pod-level resources when the pod sets them, else
// the sum over every init and regular container.
//
//   - BestEffort: no cpu or memory request or limit anywhere.
//   - Guaranteed: everything limits both cpu and memory, and the summed
//     requests equal the summed limits for both. As in the kubelet's own
//     computation, a missing request does not count as equal: API defaulting
//     (and podconfig's) copies limits into missing requests before a pod
//     gets here, so a defaulted limits-only pod is Guaranteed.
//   - Burstable: anything else.
//
// Zero and negative quantities count as not set. A nil pod is BestEffort.
// Class does not allocate.
func Class(pod *v1.Pod) v1.PodQOSClass {
	if pod == nil {
		return v1.PodQOSBestEffort
	}
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	var s sums
	guaranteed := true
	if podLevelSet(pod) {
		s.add(pod.Spec.Resources.Requests, false)
		cpu, mem := s.add(pod.Spec.Resources.Limits, true)
		guaranteed = cpu && mem
	} else {
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range cs {
				s.add(cs[i].Resources.Requests, false)
				if cpu, mem := s.add(cs[i].Resources.Limits, true); !cpu || !mem {
					guaranteed = false
				}
			}
		}
	}
	if !s.reqSet[0] && !s.reqSet[1] && !s.limSet[0] && !s.limSet[1] {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for i := range 2 {
			if s.reqSet[i] != s.limSet[i] || s.req[i] != s.lim[i] {
				guaranteed = false
			}
		}
	}
	if guaranteed {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// sums holds summed cpu (milli) and memory (bytes) requests and limits.
type sums struct {
	req, lim       [2]int64
	reqSet, limSet [2]bool
}

// add sums rl's positive cpu and memory into the requests or limits and
// reports which of the two it had.
func (s *sums) add(rl v1.ResourceList, limits bool) (cpu, mem bool) {
	into, set := &s.req, &s.reqSet
	if limits {
		into, set = &s.lim, &s.limSet
	}
	if q, ok := rl[v1.ResourceCPU]; ok && q.Sign() > 0 {
		into[0] += q.MilliValue()
		set[0], cpu = true, true
	}
	if q, ok := rl[v1.ResourceMemory]; ok && q.Sign() > 0 {
		into[1] += q.Value()
		set[1], mem = true, true
	}
	return cpu, mem
}

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
