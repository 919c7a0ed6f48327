package runtime

import "errors"

// Sentinel errors. Match them with errors.Is.
var (
	// ErrInvalidPod: the pod spec can't be run (the error says which field).
	ErrInvalidPod = errors.New("runtime: invalid pod")
	// ErrRuntimeClassNotFound: spec.runtimeClassName names no known class.
	ErrRuntimeClassNotFound = errors.New("runtime: runtime class not found")
	// ErrCreateContainerConfig: a container's CRI config could not be built
	// (reason CreateContainerConfigError).
	ErrCreateContainerConfig = errors.New("runtime: create container config error")
	// ErrImagePull: pulling the image failed (reason ErrImagePull).
	ErrImagePull = errors.New("runtime: image pull failed")
	// ErrImagePullBackOff: a pull is in back-off (reason ImagePullBackOff).
	ErrImagePullBackOff = errors.New("runtime: image pull back-off")
	// ErrImageNeverPull: policy Never and the image is not present (reason ErrImageNeverPull).
	ErrImageNeverPull = errors.New("runtime: image not present with pull policy Never")
	// ErrCrashLoopBackOff: a container is in restart back-off (reason CrashLoopBackOff).
	ErrCrashLoopBackOff = errors.New("runtime: container in crash-loop back-off")
	// ErrInvalidConfig: a Config field is missing or bad.
	ErrInvalidConfig = errors.New("runtime: invalid config")
)
