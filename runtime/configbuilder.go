package runtime

// This file is the contract between the action engine (manager.go and friends)
// and the spec -> CRI config translation (containerconfig.go, sandboxconfig.go,
// env.go, auth.go, resources.go, securitycontext.go). The translation side owns
// this file and replaces these stubs.

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// configBuilder turns pod specs into CRI configs. It does no CRI calls.
type configBuilder struct {
	cfg *Config // defaults filled
}

// sandboxConfig builds the PodSandboxConfig of a pod for the given attempt.
// Errors wrap ErrInvalidPod (bad spec) and name the bad field.
func (b *configBuilder) sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	panic("not implemented")
}

// runtimeHandler resolves spec.runtimeClassName to a CRI handler ("" = default).
// An unknown class wraps ErrRuntimeClassNotFound.
func (b *configBuilder) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	panic("not implemented")
}

// containerInput is what containerConfig needs besides the spec.
type containerInput struct {
	Pod           *v1.Pod
	Container     *v1.Container
	ContainerType string // ContainerTypeInit, ContainerTypeSidecar, ContainerTypeRegular
	RestartCount  int
	PodIPs        []string
	ImageRef      string // the image reference to create from (id or digest from pull)
	Hash          uint64
}

// containerConfig builds the CRI ContainerConfig for one container instance.
// Errors are config errors (the kubelet's CreateContainerConfigError): they
// wrap ErrCreateContainerConfig and say what is wrong (a missing env source,
// a bad $(VAR), mounts that failed).
func (b *configBuilder) containerConfig(ctx context.Context, in containerInput) (*runtimeapi.ContainerConfig, error) {
	panic("not implemented")
}

// pullAuths turns the pod's imagePullSecrets (already fetched, type
// kubernetes.io/dockerconfigjson or dockercfg) into the CRI auths that match
// the image's registry, most specific first. No match = nil, nil.
func (b *configBuilder) pullAuths(image string, secrets []v1.Secret) ([]*runtimeapi.AuthConfig, error) {
	panic("not implemented")
}
