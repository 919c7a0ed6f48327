package kubetypes

import (
	"k8s.io/apimachinery/pkg/types"
)

// EventType is the kind of a PodLifecycleEvent.
type EventType string

const (
	// ContainerStarted: a container (or sandbox) is now running.
	ContainerStarted EventType = "ContainerStarted"
	// ContainerDied: a container (or sandbox) is now exited, or vanished
	// without having been seen exited.
	ContainerDied EventType = "ContainerDied"
	// ContainerRemoved: a container (or sandbox) no longer exists.
	ContainerRemoved EventType = "ContainerRemoved"
	// PodSync: the pod was re-inspected and should be synced, though no
	// single container change explains why.
	PodSync EventType = "PodSync"
	// ContainerChanged: a container went to an unknown state. Defined for
	// completeness; it is never sent (as in the kubelet).
	ContainerChanged EventType = "ContainerChanged"
)

// PodLifecycleEvent says that something happened to a pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID types.UID
	// Type is what happened.
	Type EventType
	// Data is the CRI id (a string) of the container or sandbox concerned;
	// nil for PodSync.
	Data any
	// Sandbox is true when Data is the id of a pod sandbox rather than of a
	// container (sandbox starts, deaths and removals are events too).
	Sandbox bool
}
