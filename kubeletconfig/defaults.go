package kubeletconfig

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kc "k8s.io/kubelet/config/v1beta1"
)

// The kubelet's defaults that other packages refer to.
const (
	DefaultPort                   = 10250
	DefaultHealthzPort            = 10248
	DefaultMaxPods                = 110
	DefaultContainerRuntime       = "unix:///run/containerd/containerd.sock"
	DefaultPodLogsDir             = "/var/log/pods"
	DefaultVolumePluginDir        = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/"
	DefaultResolvConf             = "/etc/resolv.conf"
	DefaultMemoryThrottlingFactor = 0.9
	// DefaultMaxContainerRestartPeriod is crashLoopBackOff's
	// maxContainerRestartPeriod when KubeletCrashLoopBackOffMax is on
	// (its default).
	DefaultMaxContainerRestartPeriod = 300 * time.Second
	// kubeletOOMScoreAdj is the kubelet's own OOM score adjustment.
	kubeletOOMScoreAdj = -999
)

// DefaultEvictionHard returns the kubelet's hard eviction thresholds on
// Linux, which it uses when the file has no evictionHard (and merges into
// a given one with mergeDefaultEvictionSettings).
func DefaultEvictionHard() map[string]string {
	return map[string]string{
		"memory.available":   "100Mi",
		"nodefs.available":   "10%",
		"nodefs.inodesFree":  "5%",
		"imagefs.available":  "15%",
		"imagefs.inodesFree": "5%",
	}
}

func ptr[T any](v T) *T { return &v }

func dur(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }

// SetDefaults fills every unset field of c with the kubelet v1.36.3's
// default (its SetDefaults_KubeletConfiguration, with the feature gates of
// c.FeatureGates over the kubelet's defaults), then does what the kubelet
// does when it loads a file: no evictionHard means the kubelet's
// (DefaultEvictionHard), and mergeDefaultEvictionSettings adds the missing
// ones to a given evictionHard. It is what Load does after decoding;
// calling it again changes nothing.
func SetDefaults(c *kc.KubeletConfiguration) {
	g := defaultGates(c.FeatureGates)
	zero := metav1.Duration{}
	setBool := func(p **bool, v bool) {
		if *p == nil {
			*p = ptr(v)
		}
	}
	setInt32 := func(p **int32, v int32) {
		if *p == nil {
			*p = ptr(v)
		}
	}
	setDur := func(p *metav1.Duration, d time.Duration) {
		if *p == zero {
			*p = dur(d)
		}
	}
	setStr := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}

	// The server and its clients.
	setBool(&c.EnableServer, true)
	setStr(&c.Address, "0.0.0.0")
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	setBool(&c.Authentication.Anonymous.Enabled, false)
	setBool(&c.Authentication.Webhook.Enabled, true)
	setDur(&c.Authentication.Webhook.CacheTTL, 2*time.Minute)
	if c.Authorization.Mode == "" {
		c.Authorization.Mode = kc.KubeletAuthorizationModeWebhook
	}
	setDur(&c.Authorization.Webhook.CacheAuthorizedTTL, 5*time.Minute)
	setDur(&c.Authorization.Webhook.CacheUnauthorizedTTL, 30*time.Second)
	setBool(&c.EnableDebuggingHandlers, true)
	setInt32(&c.HealthzPort, DefaultHealthzPort)
	setStr(&c.HealthzBindAddress, "127.0.0.1")
	setDur(&c.StreamingConnectionIdleTimeout, 4*time.Hour)
	setBool(&c.EnableSystemLogHandler, true)
	setBool(&c.EnableProfilingHandler, true)
	setBool(&c.EnableDebugFlagsHandler, true)

	// Pod sources and the sync loop.
	setDur(&c.SyncFrequency, time.Minute)
	setDur(&c.FileCheckFrequency, 20*time.Second)
	setDur(&c.HTTPCheckFrequency, 20*time.Second)
	if c.MaxPods == 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.PodPidsLimit == nil || *c.PodPidsLimit < 0 {
		c.PodPidsLimit = ptr[int64](-1)
	}
	if c.ResolverConfig == nil {
		c.ResolverConfig = ptr(DefaultResolvConf)
	}
	setStr(&c.PodLogsDir, DefaultPodLogsDir)
	setStr(&c.ContainerRuntimeEndpoint, DefaultContainerRuntime)
	setDur(&c.RuntimeRequestTimeout, 2*time.Minute)
	setStr(&c.VolumePluginDir, DefaultVolumePluginDir)
	if c.ConfigMapAndSecretChangeDetectionStrategy == "" {
		c.ConfigMapAndSecretChangeDetectionStrategy = kc.WatchChangeDetectionStrategy
	}

	// Images.
	setInt32(&c.RegistryPullQPS, 5)
	if c.RegistryBurst == 0 {
		c.RegistryBurst = 10
	}
	if c.SerializeImagePulls == nil {
		// Parallel pulls when maxParallelImagePulls asks for two or more.
		c.SerializeImagePulls = ptr(c.MaxParallelImagePulls == nil || *c.MaxParallelImagePulls < 2)
	}
	setDur(&c.ImageMinimumGCAge, 2*time.Minute)
	setInt32(&c.ImageGCHighThresholdPercent, 85)
	setInt32(&c.ImageGCLowThresholdPercent, 80)
	if g.Enabled(gateKubeletEnsureSecretPulledImages) && c.ImagePullCredentialsVerificationPolicy == "" {
		c.ImagePullCredentialsVerificationPolicy = kc.NeverVerifyPreloadedImages
	}

	// Events and the API server client.
	setInt32(&c.EventRecordQPS, 50)
	if c.EventBurst == 0 {
		c.EventBurst = 100
	}
	setInt32(&c.KubeAPIQPS, 50)
	if c.KubeAPIBurst == 0 {
		c.KubeAPIBurst = 100
	}
	setStr(&c.ContentType, "application/vnd.kubernetes.protobuf")

	// Node status and lease. The report frequency follows an explicitly
	// set update frequency (the kubelet's backward compatibility).
	if c.NodeStatusReportFrequency == zero {
		if c.NodeStatusUpdateFrequency == zero {
			c.NodeStatusReportFrequency = dur(5 * time.Minute)
		} else {
			c.NodeStatusReportFrequency = c.NodeStatusUpdateFrequency
		}
	}
	setDur(&c.NodeStatusUpdateFrequency, 10*time.Second)
	if c.NodeLeaseDurationSeconds == 0 {
		c.NodeLeaseDurationSeconds = 40
	}
	setInt32(&c.NodeStatusMaxImages, 50)
	setBool(&c.RegisterNode, true)

	// Cgroups, resource managers, reservations.
	setBool(&c.CgroupsPerQOS, true)
	setStr(&c.CgroupDriver, "cgroupfs")
	setStr(&c.CPUManagerPolicy, "none")
	setDur(&c.CPUManagerReconcilePeriod, 10*time.Second)
	setStr(&c.MemoryManagerPolicy, kc.NoneMemoryManagerPolicy)
	setStr(&c.TopologyManagerPolicy, kc.NoneTopologyManagerPolicy)
	setStr(&c.TopologyManagerScope, kc.ContainerTopologyManagerScope)
	setBool(&c.CPUCFSQuota, true)
	if c.CPUCFSQuotaPeriod == nil {
		c.CPUCFSQuotaPeriod = &metav1.Duration{Duration: 100 * time.Millisecond}
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{"pods"}
	}
	if c.MemoryThrottlingFactor == nil {
		c.MemoryThrottlingFactor = ptr(DefaultMemoryThrottlingFactor)
	}
	if c.MemoryReservationPolicy == "" {
		c.MemoryReservationPolicy = kc.NoneMemoryReservationPolicy
	}
	setBool(&c.FailCgroupV1, true)
	setBool(&c.FailSwapOn, true)
	setBool(&c.LocalStorageCapacityIsolation, true)
	setBool(&c.SeccompDefault, false)
	setInt32(&c.OOMScoreAdj, kubeletOOMScoreAdj)
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = 1_000_000
	}

	// Eviction.
	setDur(&c.EvictionPressureTransitionPeriod, 5*time.Minute)
	setBool(&c.MergeDefaultEvictionSettings, false)

	// Networking, volumes.
	setStr(&c.HairpinMode, kc.PromiscuousBridge)
	setBool(&c.EnableControllerAttachDetach, true)
	setBool(&c.MakeIPTablesUtilChains, true)
	setInt32(&c.IPTablesMasqueradeBit, 14)
	setInt32(&c.IPTablesDropBit, 15)
	setDur(&c.VolumeStatsAggPeriod, time.Minute)

	// Container logs.
	setStr(&c.ContainerLogMaxSize, "10Mi")
	setInt32(&c.ContainerLogMaxFiles, 5)
	setInt32(&c.ContainerLogMaxWorkers, 1)
	if c.ContainerLogMonitorInterval == nil {
		c.ContainerLogMonitorInterval = &metav1.Duration{Duration: 10 * time.Second}
	}
	if g.Enabled(gateKubeletCrashLoopBackOffMax) && c.CrashLoopBackOff.MaxContainerRestartPeriod == nil {
		c.CrashLoopBackOff.MaxContainerRestartPeriod = &metav1.Duration{Duration: DefaultMaxContainerRestartPeriod}
	}

	// The agent's own logging: component-base's recommended settings, as
	// the kubelet takes them.
	logsapi.SetRecommendedLoggingConfiguration(&c.Logging)

	// Quantities of reservedMemory are rounded up to milli-units, as the
	// API's resource lists are.
	for i := range c.ReservedMemory {
		for name, q := range c.ReservedMemory[i].Limits {
			q.RoundUp(resource.Milli)
			c.ReservedMemory[i].Limits[name] = q
		}
	}

	// What the kubelet does on loading a file.
	if c.EvictionHard == nil {
		c.EvictionHard = DefaultEvictionHard()
	} else if *c.MergeDefaultEvictionSettings {
		for k, v := range DefaultEvictionHard() {
			if _, ok := c.EvictionHard[k]; !ok {
				c.EvictionHard[k] = v
			}
		}
	}
}
