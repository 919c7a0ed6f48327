package volumemgr

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors of the volume manager, wrapped with %w and matched with
// errors.Is. The plugins' sentinels are in errors_plugins.go.
var (
	// ErrInvalidConfig: a Config field is missing or out of range; the
	// message names the field.
	ErrInvalidConfig = errors.New("volumemgr: invalid config")
	// ErrNoPodSource: Run was called before the pod source was set (neither
	// Config.Pods nor SetPodSource).
	ErrNoPodSource = errors.New("volumemgr: no pod source")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrVolumeNotMounted: a container mounts a volume that is not (yet)
	// mounted for its pod (ContainerMounts before WaitForAttachAndMount).
	ErrVolumeNotMounted = errors.New("volumemgr: volume not mounted")
	// ErrVolumeNotFound: a volumeMount names a volume the pod does not have.
	ErrVolumeNotFound = errors.New("volumemgr: volume not found in the pod")
	// ErrTimeout is what WaitForAttachAndMount and WaitForUnmount wrap when
	// Config.WaitTimeout passes. Its text is the one the kubelet's error
	// messages end with.
	ErrTimeout = errors.New("timed out waiting for the condition")
)

// ErrInvalidVolume: a volume's spec has a value the plugin refuses (a
// negative emptyDir sizeLimit); the wrapping error names the field.
var ErrInvalidVolume = errors.New("volumemgr: invalid volume")
