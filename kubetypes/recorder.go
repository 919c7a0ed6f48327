package kubetypes

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// EventRecorder records Kubernetes events ("kubectl describe" shows them)
// about an object: a *v1.Pod, a *v1.Node or a *v1.ObjectReference (see
// ContainerRef, PodRef and NodeRef). eventtype is v1.EventTypeNormal or
// v1.EventTypeWarning; reason is a short UpperCamelCase word (the Reason*
// constants); message is for people.
//
// Implementations must never block the caller for long and must never
// fail it: a recorder that cannot deliver an event drops it. Parts take an
// EventRecorder in their Config; nil there means NopRecorder. client-go's
// record.EventRecorder satisfies it; package events has the recorders
// nodekit ships (zap, fake, multi, last warning per pod) and
// events/apiserver the one writing to the API server.
type EventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// NopRecorder drops every event.
type NopRecorder struct{}

// Event drops the event.
func (NopRecorder) Event(runtime.Object, string, string, string) {}

// Eventf drops the event.
func (NopRecorder) Eventf(runtime.Object, string, string, string, ...any) {}

// RecorderOrNop returns r, or NopRecorder when r is nil.
func RecorderOrNop(r EventRecorder) EventRecorder {
	if r == nil {
		return NopRecorder{}
	}
	return r
}

// PodRef is the reference events about pod name (the kubelet's
// ref.GetReference for a pod).
func PodRef(pod *v1.Pod) *v1.ObjectReference {
	return &v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1",
		Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
}

// ContainerRef is the reference of events about one container of pod:
// the pod's, with FieldPath spec.containers{name} (or initContainers,
// ephemeralContainers), as the kubelet's GenerateContainerRef. A name the
// pod does not have gets the pod's reference without a field path.
func ContainerRef(pod *v1.Pod, container string) *v1.ObjectReference {
	ref := PodRef(pod)
	if path := containerFieldPath(pod, container); path != "" {
		ref.FieldPath = path
	}
	return ref
}

func containerFieldPath(pod *v1.Pod, name string) string {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return "spec.containers{" + name + "}"
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return "spec.initContainers{" + name + "}"
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return "spec.ephemeralContainers{" + name + "}"
		}
	}
	return ""
}

// NodeRef is the reference of events about node name: as the kubelet's,
// kind Node, no namespace, and the name as UID.
func NodeRef(name string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
}

// ObjectRef turns the object of an event into its reference: a
// *v1.ObjectReference as is, a *v1.Pod or *v1.Node as PodRef and NodeRef,
// any other object through its metadata and type.
func ObjectRef(obj runtime.Object) (*v1.ObjectReference, error) {
	switch o := obj.(type) {
	case nil:
		return nil, fmt.Errorf("kubetypes: event about a nil object")
	case *v1.ObjectReference:
		if o == nil {
			return nil, fmt.Errorf("kubetypes: event about a nil reference")
		}
		return o, nil
	case *v1.Pod:
		if o == nil {
			return nil, fmt.Errorf("kubetypes: event about a nil pod")
		}
		return PodRef(o), nil
	case *v1.Node:
		if o == nil {
			return nil, fmt.Errorf("kubetypes: event about a nil node")
		}
		return &v1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: o.Name, UID: o.UID, ResourceVersion: o.ResourceVersion}, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("kubetypes: event about an object without metadata: %w", err)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return nil, fmt.Errorf("kubetypes: event about %T, whose kind is not set", obj)
	}
	return &v1.ObjectReference{
		Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(),
		Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(),
		ResourceVersion: m.GetResourceVersion(),
	}, nil
}

// Event reasons, as the kubelet records them (pkg/kubelet/events), shared
// by every part that records events.
const (
	// Containers.
	ReasonCreated             = "Created"
	ReasonStarted             = "Started"
	ReasonFailed              = "Failed"
	ReasonKilling             = "Killing"
	ReasonBackOff             = "BackOff"
	ReasonExceededGracePeriod = "ExceededGracePeriod"
	ReasonFailedPostStartHook = "FailedPostStartHook"
	ReasonFailedPreStopHook   = "FailedPreStopHook"
	ReasonFailedKillPod       = "FailedKillPod"
	// Images (Failed and BackOff are shared with containers).
	ReasonPulling           = "Pulling"
	ReasonPulled            = "Pulled"
	ReasonInspectFailed     = "InspectFailed"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// Sandboxes.
	ReasonSandboxChanged         = "SandboxChanged"
	ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"
	// Probes.
	ReasonUnhealthy    = "Unhealthy"
	ReasonProbeWarning = "ProbeWarning"
	// Volumes.
	ReasonFailedMount = "FailedMount"
	// Eviction.
	ReasonEvicted              = "Evicted"
	ReasonEvictionThresholdMet = "EvictionThresholdMet"
	// The node.
	ReasonStarting                         = "Starting"
	ReasonNodeReady                        = "NodeReady"
	ReasonNodeNotReady                     = "NodeNotReady"
	ReasonRebooted                         = "Rebooted"
	ReasonNodeAllocatableEnforced          = "NodeAllocatableEnforced"
	ReasonFailedNodeAllocatableEnforcement = "FailedNodeAllocatableEnforcement"
	ReasonImageGCFailed                    = "ImageGCFailed"
	ReasonContainerGCFailed                = "ContainerGCFailed"
	ReasonNodeHasSufficientMemory          = "NodeHasSufficientMemory"
	ReasonNodeHasInsufficientMemory        = "NodeHasInsufficientMemory"
	ReasonNodeHasNoDiskPressure            = "NodeHasNoDiskPressure"
	ReasonNodeHasDiskPressure              = "NodeHasDiskPressure"
	ReasonNodeHasSufficientPID             = "NodeHasSufficientPID"
	ReasonNodeHasInsufficientPID           = "NodeHasInsufficientPID"
)
