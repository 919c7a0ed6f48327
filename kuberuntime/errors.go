package kuberuntime

import (
	"errors"
	"time"

	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kubetypes"
)

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
	// ErrImagePullBackOff: a pull is in back-off (reason ImagePullBackOff);
	// the same value as kubetypes.ErrImagePullBackOff.
	ErrImagePullBackOff = kubetypes.ErrImagePullBackOff
	// ErrImageNeverPull: policy Never and the image is not present (reason ErrImageNeverPull).
	ErrImageNeverPull = errors.New("runtime: image not present with pull policy Never")
	// ErrImageInspect: the runtime could not tell whether the image is present
	// (reason ImageInspectError).
	ErrImageInspect = errors.New("runtime: image inspect failed")
	// ErrCrashLoopBackOff: a container is in restart back-off (reason
	// CrashLoopBackOff); the same value as kubetypes.ErrCrashLoopBackOff.
	ErrCrashLoopBackOff = kubetypes.ErrCrashLoopBackOff
	// ErrCreateContainer: CreateContainer failed (reason CreateContainerError).
	ErrCreateContainer = errors.New("runtime: create container failed")
	// ErrRunContainer: StartContainer failed (reason RunContainerError).
	ErrRunContainer = errors.New("runtime: start container failed")
	// ErrPostStartHook: the postStart hook failed and the container was
	// killed (reason PostStartHookError).
	ErrPostStartHook = errors.New("runtime: postStart hook failed")
	// ErrCreateSandbox: the pod sandbox could not be created or inspected.
	ErrCreateSandbox = errors.New("runtime: create pod sandbox failed")
	// ErrKillContainer: stopping a container failed.
	ErrKillContainer = errors.New("runtime: kill container failed")
	// ErrKillSandbox: stopping a sandbox failed.
	ErrKillSandbox = errors.New("runtime: stop pod sandbox failed")
	// ErrRemoveContainer: removing a container failed.
	ErrRemoveContainer = errors.New("runtime: remove container failed")
	// ErrExitUnconfirmed: a container's previous instance exited as the
	// runtime's events reported, but its CRI still showed it running after
	// ExitConfirmTimeout; its replacement is not started yet (the step
	// is a BackoffError: the pod worker tries again about a second later).
	ErrExitUnconfirmed = errors.New("runtime: previous instance still running in the CRI")
	// ErrContainerNotFound: GetContainerLogs was asked for a container the
	// pod's spec does not have (the kubelet answers 404).
	ErrContainerNotFound = errors.New("runtime: container not found in pod")
	// ErrContainerNotStarted: the container has no instance (and so no log)
	// yet (the kubelet answers 400, "waiting to start").
	ErrContainerNotStarted = errors.New("runtime: container has not started")
	// ErrNoPreviousInstance: logs of the previous instance were asked for
	// and there is none (the kubelet answers 400).
	ErrNoPreviousInstance = errors.New("runtime: previous terminated container not found")
	// ErrInvalidLogOptions: PodLogOptions that the API server would refuse
	// (the kubelet answers 400); the same value as logs.ErrInvalidOptions.
	ErrInvalidLogOptions = logs.ErrInvalidOptions
	// ErrInvalidConfig: a Config field is missing or bad.
	ErrInvalidConfig = errors.New("runtime: invalid config")
	// ErrInvalidArgument: a method was called with a bad argument (the
	// error names it).
	ErrInvalidArgument = errors.New("runtime: invalid argument")
)

// Waiting reasons recorded per container (see Manager.Reason); the same
// strings the kubelet reports in containerStatuses[].state.waiting.reason.
const (
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonImageInspectError          = "ImageInspectError"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonPreStartHookError          = "PreStartHookError"
	ReasonPostStartHookError         = "PostStartHookError"
)

// reasonFor maps a start error to its waiting reason ("" for none).
func reasonFor(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrCrashLoopBackOff):
		return ReasonCrashLoopBackOff
	case errors.Is(err, ErrImagePullBackOff):
		return ReasonImagePullBackOff
	case errors.Is(err, ErrImageNeverPull):
		return ReasonErrImageNeverPull
	case errors.Is(err, ErrImagePull):
		return ReasonErrImagePull
	case errors.Is(err, ErrImageInspect):
		return ReasonImageInspectError
	case errors.Is(err, ErrCreateContainerConfig):
		return ReasonCreateContainerConfigError
	case errors.Is(err, ErrCreateContainer):
		return ReasonCreateContainerError
	case errors.Is(err, ErrRunContainer):
		return ReasonRunContainerError
	case errors.Is(err, ErrPostStartHook):
		return ReasonPostStartHookError
	}
	return ""
}

// BackoffError is a step error that knows when a retry can succeed: a
// container in crash-loop back-off can start once Until has passed. Callers
// that schedule retries (the pod workers) look for BackoffUntil through
// errors.As; errors.Is still matches the wrapped sentinel.
type BackoffError struct {
	Err   error
	Until time.Time
}

func (e *BackoffError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *BackoffError) Unwrap() error { return e.Err }

// BackoffUntil is when the back-off ends.
func (e *BackoffError) BackoffUntil() time.Time { return e.Until }
