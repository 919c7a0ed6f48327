package prober

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// Result is a probe's outcome. It is the runtime's type, so the runtime
// engine reads liveness and startup results without conversion.
type Result = kubetypes.ProbeResult

// The results (kubetypes.ProbeUnknown, ProbeSuccess, ProbeFailure).
const (
	Unknown = kubetypes.ProbeUnknown
	Success = kubetypes.ProbeSuccess
	Failure = kubetypes.ProbeFailure
)

// ProbeType is the kind of a container probe.
type ProbeType int

// The three probe types.
const (
	Liveness ProbeType = iota
	Readiness
	Startup
)

// String returns "Liveness", "Readiness" or "Startup".
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// Update is a change of a probe's result for one container instance.
// ContainerID is the API ID ("<runtime>://<id>") as in the pod status.
type Update struct {
	PodUID      types.UID
	ContainerID string
	Type        ProbeType
	Result      Result
}

// rawID strips the "<runtime>://" prefix of an API container ID; a raw CRI
// id is returned as is.
func rawID(id string) string {
	for i := 0; i+2 < len(id); i++ {
		if id[i] == ':' && id[i+1] == '/' && id[i+2] == '/' {
			return id[i+3:]
		}
	}
	return id
}
