package kuberuntime

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeService is the part of cri-api's RuntimeService that the Manager
// uses. runtime/remote and runtime/fake both satisfy it (and the whole
// cri-api interface).
type RuntimeService interface {
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, podSandboxID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)

	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, containerID string) error
	StopContainer(ctx context.Context, containerID string, timeout int64) error
	RemoveContainer(ctx context.Context, containerID string) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout []byte, stderr []byte, err error)
}

// ImageService is the part of cri-api's ImageManagerService that the Manager uses.
type ImageService interface {
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// MountProvider gives the CRI mounts of one container of a pod (volumes,
// subPaths, read-only flags already resolved). The volume manager satisfies
// it; nil means a pod's containers get no volume mounts.
type MountProvider interface {
	ContainerMounts(ctx context.Context, pod *v1.Pod, container *v1.Container) ([]*runtimeapi.Mount, error)
}

// CgroupParentProvider names the cgroup a pod's sandbox is placed under (in the
// runtime's cgroup driver's syntax). The container manager satisfies it; nil
// means the runtime's default.
type CgroupParentProvider interface {
	PodCgroupParent(pod *v1.Pod) string
}

// RuntimeClassResolver turns spec.runtimeClassName into a CRI runtime handler
// and the class's pod overhead. It returns an error wrapping ErrRuntimeClassNotFound
// for an unknown class.
type RuntimeClassResolver interface {
	RuntimeClass(ctx context.Context, name string) (handler string, overhead v1.ResourceList, err error)
}

// CPUSetProvider names the CPUs a container is pinned to, in the Linux list
// format ("0-3,8"), set as LinuxContainerResources.CpusetCpus when the
// container is created. ok false leaves cpuset to the runtime. The cpu
// manager satisfies it.
type CPUSetProvider interface {
	ContainerCPUSet(pod *v1.Pod, container *v1.Container) (cpus string, ok bool)
}

// ContainerDevices adds a container's allocated devices to its CRI config
// when it is created (envs, mounts, device nodes, annotations, CDI device
// names), after everything else is set. An error fails the container with
// CreateContainerConfigError. The device manager satisfies it.
type ContainerDevices interface {
	ApplyContainerDevices(ctx context.Context, pod *v1.Pod, container *v1.Container, cfg *runtimeapi.ContainerConfig) error
}
