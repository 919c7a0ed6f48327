package kubetypes

import "errors"

// Errors a runtime engine's SyncPod reports in a step that the sync loop
// treats as waiting, not failing: a pod whose only errors are these is in
// back-off and is synced again when the back-off ends. The engine
// (kuberuntime) declares them under the same names with the same values.
var (
	// ErrCrashLoopBackOff: a container is in restart back-off (reason CrashLoopBackOff).
	ErrCrashLoopBackOff = errors.New("runtime: container in crash-loop back-off")
	// ErrImagePullBackOff: a pull is in back-off (reason ImagePullBackOff).
	ErrImagePullBackOff = errors.New("runtime: image pull back-off")
)

// ErrInvalidResourceName: a resource name that is not a qualified name, or a
// hugepages-<size> name whose size is not a bounded, positive page size.
var ErrInvalidResourceName = errors.New("kubetypes: invalid resource name")
