package kuberuntime

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const defaultPodLogsRoot = "/var/log/pods"

// podLogDir is <root>/<ns>_<name>_<uid>.
func podLogDir(root string, pod *v1.Pod) string {
	if root == "" {
		root = defaultPodLogsRoot
	}
	return filepath.Join(root, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

// checkPodIdentity bounds the identity fields that end up in paths and names.
func checkPodIdentity(pod *v1.Pod) error {
	if pod == nil {
		return fmt.Errorf("%w: nil pod", ErrInvalidPod)
	}
	check := func(field, v string) error {
		switch {
		case v == "":
			return fmt.Errorf("%w: %s is empty", ErrInvalidPod, field)
		case len(v) > 253:
			return fmt.Errorf("%w: %s is longer than 253 characters", ErrInvalidPod, field)
		case strings.ContainsAny(v, "/\x00") || v == "." || v == "..":
			return fmt.Errorf("%w: %s %q is not a single path segment", ErrInvalidPod, field, v)
		}
		return nil
	}
	if err := check("metadata.name", pod.Name); err != nil {
		return err
	}
	if err := check("metadata.namespace", pod.Namespace); err != nil {
		return err
	}
	return check("metadata.uid", string(pod.UID))
}

// runtimeProtocol maps a port protocol; anything unknown is TCP.
func runtimeProtocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// portMappings lists the ports of the pod's regular containers. As in the
// kubelet, within one container a port name used twice, or an unnamed
// (protocol, hostIP, containerPort, hostPort) repeated, is listed once.
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for i := range pod.Spec.Containers {
		seen := map[string]bool{}
		for _, p := range pod.Spec.Containers[i].Ports {
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			key := "name/" + p.Name
			if p.Name == "" {
				key = fmt.Sprintf("%s-%s:%d:%d", proto, p.HostIP, p.ContainerPort, p.HostPort)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, &runtimeapi.PortMapping{
				Protocol:      runtimeProtocol(proto),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return out
}

func (b *configBuilder) buildSandboxConfig(ctx context.Context, pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	if err := checkPodIdentity(pod); err != nil {
		return nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       podLabels(pod),
		Annotations:  maps.Clone(pod.Annotations),
		LogDirectory: podLogDir(b.cfg.PodLogsRoot, pod),
		PortMappings: portMappings(pod),
	}
	if cfg.Annotations == nil {
		cfg.Annotations = map[string]string{}
	}
	dns, err := b.podDNS(pod)
	if err != nil {
		// Reading the host resolv.conf failed: an agent problem, not a bad spec.
		return nil, fmt.Errorf("pod %s/%s: dns: %w", pod.Namespace, pod.Name, err)
	}
	cfg.DnsConfig = dns
	if !pod.Spec.HostNetwork {
		if cfg.Hostname, err = b.podHostname(pod); err != nil {
			return nil, err
		}
	}

	lc := &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{}}
	if b.cfg.CgroupParents != nil {
		lc.CgroupParent = b.cfg.CgroupParents.PodCgroupParent(pod)
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		for _, s := range psc.Sysctls {
			lc.Sysctls[s.Name] = s.Value
		}
	}
	if lc.SecurityContext, err = sandboxSecurityContext(pod); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidPod, err)
	}
	lc.Resources = sandboxResources(pod)
	lc.Overhead = overheadResources(pod)
	cfg.Linux = lc
	return cfg, nil
}

func (b *configBuilder) resolveRuntimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	if pod == nil || pod.Spec.RuntimeClassName == nil || *pod.Spec.RuntimeClassName == "" {
		return "", nil
	}
	name := *pod.Spec.RuntimeClassName
	if b.cfg.RuntimeClasses == nil {
		return "", fmt.Errorf("runtime class %q: no RuntimeClassResolver configured: %w", name, ErrRuntimeClassNotFound)
	}
	h, _, err := b.cfg.RuntimeClasses.RuntimeClass(ctx, name)
	if err != nil {
		return "", fmt.Errorf("runtime class %q: %w", name, err)
	}
	return h, nil
}
