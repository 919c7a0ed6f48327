package runtimetest

import "errors"

// ErrRunPod is wrapped by every error of RunPod.
var ErrRunPod = errors.New("runtimetest: cannot run the pod")
