package kuberuntime

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Label and annotation keys that nodekit puts on sandboxes and containers.
// The label keys are the ones every CRI tool (crictl, containerd) and the
// kubelet understand, so a node can be inspected with the usual tools.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	// LabelContainerType is "init", "sidecar" or "regular" (nodekit's own).
	LabelContainerType = "nodekit.io/container.type"

	AnnotationContainerHash         = "io.kubernetes.container.hash"
	AnnotationRestartCount          = "io.kubernetes.container.restartCount"
	AnnotationTerminationGrace      = "io.kubernetes.pod.terminationGracePeriod"
	AnnotationTerminationMessagePth = "io.kubernetes.container.terminationMessagePath"
	// AnnotationTerminationMessagePolicy records the container's
	// terminationMessagePolicy (File or FallbackToLogsOnError).
	AnnotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	// AnnotationPreStopIndex records that the container has a preStop hook, so
	// a pod can be killed with its hook even when only the runtime view is known.
	AnnotationHasPreStop = "nodekit.io/container.hasPreStop"
)

// Container types, as recorded in LabelContainerType.
const (
	ContainerTypeInit    = "init"
	ContainerTypeSidecar = "sidecar"
	ContainerTypeRegular = "regular"
)

// podLabels are the labels of a pod's sandbox: the pod's own labels plus the
// identity keys (which win over pod labels of the same name).
func podLabels(pod *v1.Pod) map[string]string {
	l := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[LabelPodName] = pod.Name
	l[LabelPodNamespace] = pod.Namespace
	l[LabelPodUID] = string(pod.UID)
	return l
}

// containerLabels are the labels of one container of a pod.
func containerLabels(pod *v1.Pod, containerName, containerType string) map[string]string {
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: containerName,
		LabelContainerType: containerType,
	}
}

// containerAnnotations are the annotations of one container instance.
func containerAnnotations(pod *v1.Pod, c *v1.Container, hash uint64, restartCount int) map[string]string {
	a := map[string]string{
		AnnotationContainerHash: strconv.FormatUint(hash, 16),
		AnnotationRestartCount:  strconv.Itoa(restartCount),
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[AnnotationTerminationGrace] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.TerminationMessagePath != "" {
		a[AnnotationTerminationMessagePth] = c.TerminationMessagePath
	}
	if c.TerminationMessagePolicy != "" {
		a[AnnotationTerminationMessagePolicy] = string(c.TerminationMessagePolicy)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		a[AnnotationHasPreStop] = "true"
	}
	return a
}

// podIdentity is what the labels of a sandbox or container say about its pod.
type podIdentity struct {
	UID       types.UID
	Name      string
	Namespace string
}

// identityFromLabels reads a pod identity from labels; ok is false when the
// object was not made by a kubelet-compatible agent.
func identityFromLabels(labels map[string]string) (id podIdentity, ok bool) {
	uid := labels[LabelPodUID]
	if uid == "" {
		return podIdentity{}, false
	}
	return podIdentity{UID: types.UID(uid), Name: labels[LabelPodName], Namespace: labels[LabelPodNamespace]}, true
}

// containerInfo is what a container's annotations say about it. Missing or
// malformed values are zero: a container made by another agent still lists.
type containerInfo struct {
	Hash                 uint64
	RestartCount         int
	GracePeriod          *int64
	TerminationMsgAt     string
	TerminationMsgPolicy string
	HasPreStop           bool
}

func containerInfoFromAnnotations(a map[string]string) containerInfo {
	var info containerInfo
	if v, ok := a[AnnotationContainerHash]; ok {
		info.Hash, _ = strconv.ParseUint(v, 16, 64)
	}
	if v, ok := a[AnnotationRestartCount]; ok {
		info.RestartCount, _ = strconv.Atoi(v)
	}
	if v, ok := a[AnnotationTerminationGrace]; ok {
		if g, err := strconv.ParseInt(v, 10, 64); err == nil {
			info.GracePeriod = &g
		}
	}
	info.TerminationMsgAt = a[AnnotationTerminationMessagePth]
	info.TerminationMsgPolicy = a[AnnotationTerminationMessagePolicy]
	info.HasPreStop = a[AnnotationHasPreStop] == "true"
	return info
}
