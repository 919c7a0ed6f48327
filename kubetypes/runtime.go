package kubetypes

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// States of a container or sandbox.
const (
	ContainerStateCreated ContainerState = "created"
	ContainerStateRunning ContainerState = "running"
	ContainerStateExited  ContainerState = "exited"
	// ContainerStateUnknown is any state the runtime could not tell.
	ContainerStateUnknown ContainerState = "unknown"
)

// Results of a probe.
const (
	// ProbeUnknown: no result yet (or no such probe known).
	ProbeUnknown ProbeResult = iota
	ProbeSuccess
	ProbeFailure
)

// ProbeResult is the latest result of a liveness or startup probe.
type ProbeResult int

// String names the result.
func (r ProbeResult) String() string {
	switch r {
	case ProbeSuccess:
		return "Success"
	case ProbeFailure:
		return "Failure"
	default:
		return "Unknown"
	}
}

// ContainerState is the state of a container or sandbox as the runtime reports it.
type ContainerState string

// Pod is the runtime's view of one pod: the sandboxes and containers that
// carry its UID in their labels. It is what GetPods returns and what KillPod
// takes for a pod that the agent no longer knows the spec of.
type Pod struct {
	ID        types.UID
	Name      string
	Namespace string
	// CreatedAt is the creation time of the newest sandbox, in nanoseconds.
	CreatedAt  int64
	Containers []*Container
	Sandboxes  []*Container
}

// Container is the short runtime view of a container or a sandbox.
type Container struct {
	// ID is the CRI id of the container or sandbox.
	ID   string
	Name string
	// Image is the image the container was created from (as the spec named it);
	// ImageID the runtime's image id; ImageRef the digested reference if known.
	Image    string
	ImageID  string
	ImageRef string
	// Hash is the hash of the container's spec taken when it was created.
	Hash      uint64
	State     ContainerState
	CreatedAt int64
	// Type is the container's LabelContainerType ("" for sandboxes and for
	// containers made by other agents).
	Type string
	// GracePeriod is the pod's termination grace recorded on the container
	// when it was created (AnnotationTerminationGrace), if any: the grace an
	// orphaned container is stopped with.
	GracePeriod *int64
}

// PodStatus is the runtime status of one pod: every container instance
// (running and dead) and every sandbox, newest first.
type PodStatus struct {
	ID        types.UID
	Name      string
	Namespace string
	// IPs of the pod; the first is the primary.
	IPs []string
	// ContainerStatuses holds every container instance, newest first per name.
	ContainerStatuses []*ContainerStatus
	// SandboxStatuses holds every sandbox of the pod, newest first.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// TimeStamp is when this status was taken (set by its reader, e.g. pleg).
	TimeStamp time.Time
}

// ContainerStatus is the runtime status of one container instance.
type ContainerStatus struct {
	ID           string
	Name         string
	State        ContainerState
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Image        string
	ImageID      string
	ImageRef     string
	Hash         uint64
	RestartCount int
	Reason       string
	Message      string
	// Resources as the runtime reports them, if it does.
	Resources *runtimeapi.ContainerResources
	// Type is the container's LabelContainerType.
	Type string
	// GracePeriod is the termination grace recorded on the container, if any.
	GracePeriod *int64
	// LogPath is where the runtime writes the container's log, if known.
	LogPath string
	// ExitUnconfirmed: the exit was reported by the runtime's own events
	// (pleg.ContainerExited) while its CRI still listed the instance
	// running. SyncPod asks the CRI before it starts a replacement, so the
	// runtime never lists two running instances of one container.
	ExitUnconfirmed bool
}

// RunningPod is the part of a pod status that KillPod needs: the containers
// that are not exited (running, created or unknown) and every sandbox.
func (s *PodStatus) RunningPod() *Pod {
	if s == nil {
		return nil
	}
	p := &Pod{ID: s.ID, Name: s.Name, Namespace: s.Namespace}
	for _, cs := range s.ContainerStatuses {
		if cs.State == ContainerStateExited {
			continue
		}
		p.Containers = append(p.Containers, &Container{
			ID: cs.ID, Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID, ImageRef: cs.ImageRef,
			Hash: cs.Hash, State: cs.State, CreatedAt: cs.CreatedAt.UnixNano(), Type: cs.Type, GracePeriod: cs.GracePeriod,
		})
	}
	for i, sb := range s.SandboxStatuses {
		if sb == nil {
			continue
		}
		st := ContainerStateExited
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = ContainerStateRunning
		}
		p.Sandboxes = append(p.Sandboxes, &Container{ID: sb.GetId(), Name: sb.GetMetadata().GetName(), State: st, CreatedAt: sb.GetCreatedAt()})
		if i == 0 {
			p.CreatedAt = sb.GetCreatedAt()
		}
	}
	return p
}

// FindContainerStatusByName returns the newest status of the named container, or nil.
func (s *PodStatus) FindContainerStatusByName(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, cs := range s.ContainerStatuses {
		if cs.Name == name {
			return cs
		}
	}
	return nil
}

// FindContainerByName returns the named container of a runtime pod, or nil.
func (p *Pod) FindContainerByName(name string) *Container {
	if p == nil {
		return nil
	}
	for _, c := range p.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}
