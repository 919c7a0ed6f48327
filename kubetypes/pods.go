package kubetypes

import v1 "k8s.io/api/core/v1"

// SystemCriticalPriority is the lowest priority of a critical pod (the
// priority of the system-cluster-critical class).
const SystemCriticalPriority int32 = 2_000_000_000

// IsStaticPod reports whether the pod came from a source other than the
// API server (a manifest file, an HTTP URL, a push): its
// ConfigSourceAnnotation is set and is not SourceAPI.
func IsStaticPod(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	src, ok := pod.Annotations[ConfigSourceAnnotation]
	return ok && src != SourceAPI
}

// IsMirrorPod reports whether the pod is the API server's mirror of a
// static pod (it carries ConfigMirrorAnnotation).
func IsMirrorPod(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	_, ok := pod.Annotations[ConfigMirrorAnnotation]
	return ok
}

// IsCriticalPod reports whether the pod is never evicted and always
// admitted: a static pod, a mirror pod, or a pod with priority at least
// SystemCriticalPriority.
func IsCriticalPod(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	if IsStaticPod(pod) || IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= SystemCriticalPriority
}
