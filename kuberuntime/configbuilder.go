package kuberuntime

// This file is the contract between the action engine (manager.go and friends)
// and the spec -> CRI config translation (containerconfig.go, sandboxconfig.go,
// env.go, auth.go, resources.go, securitycontext.go, dns.go).

import (
	"context"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// configBuilder turns pod specs into CRI configs. It does no CRI calls.
// Every field but cfg is optional: the zero value of each gives the
// documented default, so a configBuilder{cfg: &cfg} works.
type configBuilder struct {
	cfg *Config // defaults filled

	// envSources fetches ConfigMaps and Secrets for env; nil: a container
	// that refers to one fails with ErrCreateContainerConfig.
	envSources EnvSourceGetter
	// readFile reads the host resolv.conf; nil: a bounded os read, its
	// parsed content kept in resolv while the file's stamp holds.
	readFile func(path string) ([]byte, error)
	resolv   resolvCache
	// machineMemory is the node's memory capacity in bytes for Burstable
	// oom_score_adj; 0: Config.NodeAllocatable's memory, else 16 GiB.
	machineMemory int64
	// hostIPs gives the node's IPs for env fieldRef status.hostIP(s); nil
	// or empty: the pod's status.hostIPs.
	hostIPs func() []string
	// seccompProfileRoot is where Localhost seccomp profiles live; "":
	// /var/lib/kubelet/seccomp.
	seccompProfileRoot string
	// seccompDefault makes RuntimeDefault the seccomp profile of containers
	// that name none (the kubelet's --seccomp-default); false: Unconfined.
	seccompDefault bool
}

// sandboxConfig builds the PodSandboxConfig of a pod for the given attempt.
// Errors wrap ErrInvalidPod (bad spec) and name the bad field.
func (b *configBuilder) sandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	return b.buildSandboxConfig(ctx, pod, attempt)
}

// runtimeHandler resolves spec.runtimeClassName to a CRI handler ("" = default).
// An unknown class wraps ErrRuntimeClassNotFound.
func (b *configBuilder) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	return b.resolveRuntimeHandler(ctx, pod)
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
	return b.buildContainerConfig(ctx, in)
}

// pullAuths turns the pod's imagePullSecrets (already fetched, type
// kubernetes.io/dockerconfigjson or dockercfg) into the CRI auths that match
// the image's registry, most specific first. No match = nil, nil.
func (b *configBuilder) pullAuths(image string, secrets []v1.Secret) ([]*runtimeapi.AuthConfig, error) {
	return matchPullAuths(image, secrets)
}
