// Package qos computes a pod's Kubernetes QoS class. It is the one place the
// runtime, the sync loop and the container manager get it from, so they can
// never disagree about a pod.
//
//	switch qos.Class(pod) {
//	case v1.PodQOSGuaranteed: // pod cgroup directly under the pods cgroup
//	case v1.PodQOSBurstable:  // under pods/burstable
//	default:                  // under pods/besteffort
//	}
package qos
