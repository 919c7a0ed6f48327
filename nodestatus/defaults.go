package nodestatus

import (
	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// SettersConfig gathers what DefaultSetters needs. Nil parts are skipped
// or reported as absent, as each setter documents.
type SettersConfig struct {
	Clock        clock.PassiveClock
	Address      AddressConfig
	Machine      MachineInfoConfig
	Runtime      RuntimeVersioner
	AgentVersion string
	// Port is the agent's API port for DaemonEndpoints (0 = none).
	Port      int32
	Images    ImageLister
	MaxImages int
	Pressure  kubetypes.PressureSource
	// ReadyChecks make the node not Ready while any returns an error
	// (RuntimeReadyCheck, PLEGCheck, ...).
	ReadyChecks []func() error
	// RequireEphemeralStorage makes the node not Ready while its capacity
	// has no ephemeral-storage, as the kubelet does with local storage
	// capacity isolation (its default).
	RequireEphemeralStorage bool
	VolumesSynced           func() bool
	VolumesInUse            func() []v1.UniqueVolumeName
}

// DefaultSetters returns the setters in the kubelet's order: addresses,
// machine info, version info, daemon endpoints, images, OS/arch, memory,
// disk and PID pressure, Ready (after everything that fills capacity),
// volumes in use.
func DefaultSetters(cfg SettersConfig) []Setter {
	return []Setter{
		NodeAddress(cfg.Address),
		MachineInfo(cfg.Machine),
		VersionInfo(cfg.Runtime, cfg.Machine.Machine, cfg.AgentVersion),
		DaemonEndpoints(cfg.Port),
		Images(cfg.Images, cfg.MaxImages),
		GoRuntime(),
		MemoryPressureCondition(cfg.Clock, cfg.Pressure),
		DiskPressureCondition(cfg.Clock, cfg.Pressure),
		PIDPressureCondition(cfg.Clock, cfg.Pressure),
		ReadyConditionRequiring(cfg.Clock, requiredCapacity(cfg), cfg.ReadyChecks...),
		VolumesInUse(cfg.VolumesSynced, cfg.VolumesInUse),
	}
}

func requiredCapacity(cfg SettersConfig) []v1.ResourceName {
	if cfg.RequireEphemeralStorage {
		return []v1.ResourceName{v1.ResourceEphemeralStorage}
	}
	return nil
}
