package kubetypes

import (
	v1 "k8s.io/api/core/v1"
)

// Op is the kind of a PodUpdate.
type Op int

const (
	// SET: Pods is the complete set (of one source when sent by a source; of
	// every source when delivered by PodConfig).
	SET Op = iota
	// ADD: Pods are new.
	ADD
	// UPDATE: Pods changed (spec, labels, non-local annotations).
	UPDATE
	// REMOVE: Pods are gone from their source.
	REMOVE
	// DELETE: Pods got a deletion timestamp (graceful delete).
	DELETE
	// RECONCILE: only the status of Pods changed.
	RECONCILE
)

func (o Op) String() string {
	switch o {
	case SET:
		return "SET"
	case ADD:
		return "ADD"
	case UPDATE:
		return "UPDATE"
	case REMOVE:
		return "REMOVE"
	case DELETE:
		return "DELETE"
	case RECONCILE:
		return "RECONCILE"
	}
	return "UNKNOWN"
}

// Well-known source names. Any non-empty name may be used.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourcePush = "push"
	// SourceAPI is the API server's pods. Pods sent under this name must
	// carry the API server's resourceVersions: a pod whose UID and
	// non-empty resourceVersion equal the stored ones is taken as
	// unchanged without comparing its content.
	SourceAPI = "api"
	// SourceAll is the Source of updates that span every source (SET in snapshot modes).
	SourceAll = "*"
)

// PodUpdate is a change to the pods of one source (sent by a source into its
// Channel) or of the merged state (delivered by Updates()).
type PodUpdate struct {
	Pods   []*v1.Pod
	Op     Op
	Source string
}

// Annotations the agent sets on the pods it takes in. Changes to these alone
// are not a change of the pod.
const (
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	ConfigHashAnnotation   = "kubernetes.io/config.hash"
)
