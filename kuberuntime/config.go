package kuberuntime

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
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
	// CPUSets gives each container's cpuset (the cpu manager); nil leaves
	// cpuset to the runtime.
	CPUSets CPUSetProvider
	// Devices adds each container's devices (the device manager); nil =
	// none.
	Devices ContainerDevices

	// PodsDir is the agent's per-pod directory (the Builder's
	// <root>/pods): each container instance with a terminationMessagePath
	// gets a file <PodsDir>/<uid>/containers/<name>.<random> mounted there,
	// read back as its terminated state's message. "" = no such files.
	PodsDir string

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
	// HostIPs gives the node's IPs for env fieldRef status.hostIP(s); nil
	// or empty means the pod's status.hostIPs.
	HostIPs func() []string
	// MachineMemory is the node's memory in bytes, for the oom_score_adj of
	// Burstable containers; 0 means NodeAllocatable's memory, else 16 GiB.
	MachineMemory int64
	// EnvSources fetches the ConfigMaps and Secrets that env and envFrom
	// refer to; nil makes a container that refers to one fail with
	// CreateContainerConfigError (optional references are skipped).
	EnvSources EnvSourceGetter
	// SeccompProfileRoot is where Localhost seccomp profiles live
	// (default /var/lib/kubelet/seccomp); SeccompDefault makes
	// RuntimeDefault the profile of containers that name none.
	SeccompProfileRoot string
	SeccompDefault     bool

	// Probes gives the liveness and startup results of running containers
	// (the prober satisfies it). Nil means every probe counts as passed: a
	// running container is never killed for a probe and sidecars with a
	// startup probe count as started.
	Probes ProbeResults

	// HTTPClient runs httpGet lifecycle hooks. Nil means a client of the
	// Manager's own (no proxy, HookTimeout per request).
	HTTPClient HTTPDoer

	// CallTimeout bounds each CRI call (on top of the caller's ctx). Default 2m.
	CallTimeout time.Duration
	// PullTimeout bounds one image pull. Default 10m.
	PullTimeout time.Duration
	// HookTimeout bounds a postStart hook (preStop hooks are bounded by the
	// grace period). Default 30s.
	HookTimeout time.Duration
	// ExitConfirmTimeout bounds how long SyncPod waits, before it starts a
	// container's replacement, for the CRI to stop listing a previous
	// instance running whose exit only the runtime's events reported
	// (ContainerStatus.ExitUnconfirmed; containerd 1.6 lags its own
	// /tasks/exit event by up to a few hundred milliseconds). Default 3s.
	ExitConfirmTimeout time.Duration
	// BackOffInitial and BackOffMax shape the crash-loop and image-pull
	// back-offs (doubling from initial to max). Defaults 10s and 300s. An
	// entry is forgotten 2*BackOffMax after its last update (the kubelet's
	// "ran for 10 minutes" reset).
	BackOffInitial time.Duration
	BackOffMax     time.Duration
	// DefaultGracePeriod is the termination grace (seconds) used when neither
	// the pod nor the container's annotations carry one. Default 30.
	DefaultGracePeriod int64

	// Recorder records the kubelet's container, image and sandbox events
	// (Pulling, Pulled, Failed, BackOff, Created, Started, Killing,
	// SandboxChanged, ...). Nil records none.
	Recorder kubetypes.EventRecorder

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

// ProbeResults is what the action engine reads from the prober: the latest
// liveness and startup result per CRI container id.
type ProbeResults interface {
	Liveness(containerID string) kubetypes.ProbeResult
	Startup(containerID string) kubetypes.ProbeResult
}

// HTTPDoer sends an HTTP request (an *http.Client satisfies it).
type HTTPDoer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Defaults.
const (
	DefaultCallTimeout        = 2 * time.Minute
	DefaultPullTimeout        = 10 * time.Minute
	DefaultHookTimeout        = 30 * time.Second
	DefaultExitConfirmTimeout = 3 * time.Second
	DefaultBackOffInitial     = 10 * time.Second
	DefaultBackOffMax         = 300 * time.Second
	DefaultPodLogsRoot        = "/var/log/pods"
	DefaultGracePeriodSeconds = 30
	// MinimumGracePeriodSeconds is the least time a container is given to
	// stop after its preStop hook (as the kubelet).
	MinimumGracePeriodSeconds = 2
)

// withDefaults validates c and returns a copy with defaults filled.
func (c Config) withDefaults() (Config, error) {
	if c.Runtime == nil {
		return c, fmt.Errorf("%w: Runtime is required", ErrInvalidConfig)
	}
	if c.Images == nil {
		return c, fmt.Errorf("%w: Images is required", ErrInvalidConfig)
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"CallTimeout", &c.CallTimeout, DefaultCallTimeout},
		{"PullTimeout", &c.PullTimeout, DefaultPullTimeout},
		{"HookTimeout", &c.HookTimeout, DefaultHookTimeout},
		{"ExitConfirmTimeout", &c.ExitConfirmTimeout, DefaultExitConfirmTimeout},
		{"BackOffInitial", &c.BackOffInitial, DefaultBackOffInitial},
		{"BackOffMax", &c.BackOffMax, DefaultBackOffMax},
	} {
		if *d.v < 0 {
			return c, fmt.Errorf("%w: %s must not be negative (got %v)", ErrInvalidConfig, d.name, *d.v)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.BackOffMax < c.BackOffInitial {
		return c, fmt.Errorf("%w: BackOffMax (%v) is less than BackOffInitial (%v)", ErrInvalidConfig, c.BackOffMax, c.BackOffInitial)
	}
	if c.DefaultGracePeriod < 0 {
		return c, fmt.Errorf("%w: DefaultGracePeriod must not be negative (got %d)", ErrInvalidConfig, c.DefaultGracePeriod)
	}
	if c.DefaultGracePeriod == 0 {
		c.DefaultGracePeriod = DefaultGracePeriodSeconds
	}
	if c.PodLogsRoot == "" {
		c.PodLogsRoot = DefaultPodLogsRoot
	}
	if c.PodsDir != "" && !filepath.IsAbs(c.PodsDir) {
		return c, fmt.Errorf("%w: PodsDir %q must be an absolute path", ErrInvalidConfig, c.PodsDir)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.Named("runtime")
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:   c.HookTimeout,
			Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		}
	}
	return c, nil
}

// callCtx bounds one CRI call by CallTimeout on top of ctx.
func (m *Manager) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, m.cfg.CallTimeout)
}
