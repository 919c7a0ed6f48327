package kuberuntime

import (
	"errors"
	"strings"

	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// containerEvent records an event about container c of pod, as the
// kubelet's recordContainerEvent: the container's CRI id, if given, is
// replaced by its name in the message, so that the events of successive
// instances read alike and aggregate.
func (m *Manager) containerEvent(pod *v1.Pod, c, id, typ, reason, message string) {
	if id != "" {
		message = strings.ReplaceAll(message, id, c)
	}
	m.rec.Event(kubetypes.ContainerRef(pod, c), typ, reason, message)
}

// formatPod is the kubelet's format.Pod: name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return pod.Name + "_" + pod.Namespace + "(" + string(pod.UID) + ")"
}

// startErrorMessage is the message of a container's Failed event, as the
// kubelet writes it: "Error: " and, for an image problem, the waiting
// reason (ErrImagePull, ImagePullBackOff, ...); for a CRI error, the
// runtime's message; else the error.
func startErrorMessage(err error) string {
	switch reason := reasonFor(err); reason {
	case ReasonErrImagePull, ReasonImagePullBackOff, ReasonErrImageNeverPull, ReasonImageInspectError:
		return "Error: " + reason
	}
	var cri interface{ GRPCStatus() *status.Status }
	if errors.As(err, &cri) {
		if msg := cri.GRPCStatus().Message(); msg != "" {
			return "Error: " + msg
		}
	}
	return "Error: " + err.Error()
}
