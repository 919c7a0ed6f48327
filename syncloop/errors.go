package syncloop

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors of the sync loop, the agent pod syncer and admission.
// Match them with errors.Is. (The pod workers' and the status manager's
// sentinels live in their own packages.)
var (
	// ErrInvalidConfig: a Config field is missing or bad (the error names it).
	ErrInvalidConfig = errors.New("syncloop: invalid config")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrComponentStopped: a component Loop.Run runs (the pod workers, the
	// status manager, the runtime health checks) returned before Run's ctx
	// ended; the wrapping error names it and wraps its error and
	// lifecycle.ErrStoppedEarly.
	ErrComponentStopped = errors.New("syncloop: component stopped")
	// ErrRuntimeDown: the container runtime did not answer its status
	// call, or says it is not ready.
	ErrRuntimeDown = errors.New("syncloop: container runtime is down")
	// ErrNetworkNotReady: the runtime's network is not ready; pods that do
	// not use the host network are not started (retried after about 1s).
	ErrNetworkNotReady = errors.New("syncloop: network is not ready")
	// ErrPLEGUnhealthy: the pod lifecycle event generator reports itself
	// unhealthy (its relists stalled).
	ErrPLEGUnhealthy = errors.New("syncloop: PLEG is not healthy")
	// ErrPodStillRunning: a pod's containers were still running after a
	// kill that reported success; the termination is retried.
	ErrPodStillRunning = errors.New("syncloop: pod still has running containers")
	// ErrHook: a volume, cgroup or pull-secret hook failed for a pod.
	ErrHook = errors.New("syncloop: pod hook failed")
	// ErrUnsafePath: a pod UID is not a single safe path segment, so no
	// directory is made or removed for it.
	ErrUnsafePath = errors.New("syncloop: unsafe path segment")
)
