package runtime

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
)

// Config configures a Manager. Only Runtime and Images are required.
type Config struct {
	// Runtime and Images are the CRI endpoints (often the same object).
	Runtime RuntimeService
	Images  ImageService

	// Mounts, CgroupParents and RuntimeClasses are optional providers.
	Mounts         MountProvider
	CgroupParents  CgroupParentProvider
	RuntimeClasses RuntimeClassResolver

	// PodLogsRoot is where container logs go:
	// <PodLogsRoot>/<ns>_<name>_<uid>/<container>/<restart>.log. Default /var/log/pods.
	PodLogsRoot string

	// DNS is the cluster DNS configuration put into sandboxes.
	DNS DNSConfig

	// NodeAllocatable is used for resourceFieldRef env values of containers
	// without a limit (as the kubelet does). Nil means no such default.
	NodeAllocatable func() v1.ResourceList

	// NodeName is the node's name, for env fieldRef spec.nodeName.
	NodeName string

	Clock      clock.Clock
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// DNSConfig is the agent's DNS settings for pods (the kubelet's --cluster-dns,
// --cluster-domain and --resolv-conf).
type DNSConfig struct {
	ClusterDNS    []string
	ClusterDomain string
	// ResolvConf is the host resolv.conf read for dnsPolicy Default and for
	// ClusterFirst without ClusterDNS. Empty means /etc/resolv.conf; "-" none.
	ResolvConf string
}
