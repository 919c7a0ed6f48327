package kubeletconfig

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	tracingapi "k8s.io/component-base/tracing/api/v1"
	kc "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
)

// InvalidError lists every problem Validate found, each worded as the
// kubelet words it. errors.Is(err, ErrInvalid) holds.
type InvalidError struct {
	Errors []error
}

func (e *InvalidError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v (%d problem", ErrInvalid, len(e.Errors))
	if len(e.Errors) != 1 {
		b.WriteByte('s')
	}
	b.WriteString("):")
	for _, err := range e.Errors {
		b.WriteString("\n  - ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the problems.
func (e *InvalidError) Unwrap() []error { return e.Errors }

// ValidateOptions are the facts about the host that the kubelet's
// validation reads from it.
type ValidateOptions struct {
	// CgroupV1: the agent manages cgroups on a host with cgroup v1. The
	// kubelet refuses such a host unless failCgroupV1 is false (its
	// default is true), and refuses singleProcessOOMKill: false there. An
	// agent that manages no cgroups (the fake runtime, no container
	// manager) leaves it false.
	CgroupV1 bool
}

// Validate checks a defaulted configuration (SetDefaults) as the kubelet
// v1.36.3's ValidateKubeletConfiguration does, with the feature gates of
// c.FeatureGates over the kubelet's defaults, and returns every problem at
// once as an *InvalidError (nil when there is none). As the kubelet, it
// reports only the feature gate errors when featureGates cannot be applied.
func Validate(c *kc.KubeletConfiguration, opts ValidateOptions) error {
	g, gateErrs := newGates(c.FeatureGates)
	if len(gateErrs) > 0 {
		return &InvalidError{Errors: gateErrs}
	}
	v := validator{c: c, g: g, opts: opts}
	v.check()
	if len(v.errs) == 0 {
		return nil
	}
	return &InvalidError{Errors: v.errs}
}

type validator struct {
	opts ValidateOptions
	c    *kc.KubeletConfiguration
	g    *gates
	errs []error
}

func (v *validator) bad(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("invalid configuration: "+format, args...))
}

func i32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func boolv(p *bool) bool { return p != nil && *p }

func durv(p *metav1.Duration) metav1.Duration {
	if p == nil {
		return metav1.Duration{}
	}
	return *p
}

func outside(n, lo, hi int64) bool { return n < lo || n > hi }

func badPort(n int32) bool { return outside(int64(n), 1, 65535) }

func (v *validator) check() {
	c, g := v.c, v.g
	if c.NodeLeaseDurationSeconds <= 0 {
		v.bad("nodeLeaseDurationSeconds must be greater than 0")
	}
	if c.SystemCgroups != "" && c.CgroupRoot == "" {
		v.bad("systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified")
	}
	if c.EventBurst < 0 {
		v.bad("eventBurst (--event-burst) %v must not be a negative number", c.EventBurst)
	}
	if i32(c.EventRecordQPS) < 0 {
		v.bad("eventRecordQPS (--event-qps) %v must not be a negative number", i32(c.EventRecordQPS))
	}
	if hp := i32(c.HealthzPort); hp != 0 && badPort(hp) {
		v.bad("healthzPort (--healthz-port) %v must be between 1 and 65535, inclusive", hp)
	}
	quota := durv(c.CPUCFSQuotaPeriod)
	if !g.Enabled(gateCustomCPUCFSQuotaPeriod) && quota != dur(100*time.Millisecond) {
		v.bad("cpuCFSQuotaPeriod (--cpu-cfs-quota-period) %v requires feature gate CustomCPUCFSQuotaPeriod", quota)
	}
	if g.Enabled(gateCustomCPUCFSQuotaPeriod) && outside(int64(quota.Duration), int64(time.Millisecond), int64(time.Second)) {
		v.bad("cpuCFSQuotaPeriod (--cpu-cfs-quota-period) %v must be between 1ms and 1sec, inclusive", quota)
	}
	high, low := i32(c.ImageGCHighThresholdPercent), i32(c.ImageGCLowThresholdPercent)
	if outside(int64(high), 0, 100) {
		v.bad("imageGCHighThresholdPercent (--image-gc-high-threshold) %v must be between 0 and 100, inclusive", high)
	}
	if outside(int64(low), 0, 100) {
		v.bad("imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be between 0 and 100, inclusive", low)
	}
	if low >= high {
		v.bad("imageGCLowThresholdPercent (--image-gc-low-threshold) %v must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %v", low, high)
	}
	minAge, maxAge := c.ImageMinimumGCAge.Duration, c.ImageMaximumGCAge.Duration
	if maxAge != 0 && !g.Enabled(gateImageMaximumGCAge) {
		v.bad("ImageMaximumGCAge feature gate is required for Kubelet configuration option imageMaximumGCAge")
	}
	if minAge < 0 {
		v.bad("imageMinimumGCAge %v must not be negative", minAge)
	}
	if maxAge < 0 {
		v.bad("imageMaximumGCAge %v must not be negative", maxAge)
	}
	if maxAge > 0 && maxAge <= minAge {
		v.bad("imageMaximumGCAge %v must be greater than imageMinimumGCAge %v", maxAge, minAge)
	}
	if b := i32(c.IPTablesDropBit); outside(int64(b), 0, 31) {
		v.bad("iptablesDropBit (--iptables-drop-bit) %v must be between 0 and 31, inclusive", b)
	}
	if b := i32(c.IPTablesMasqueradeBit); outside(int64(b), 0, 31) {
		v.bad("iptablesMasqueradeBit (--iptables-masquerade-bit) %v must be between 0 and 31, inclusive", b)
	}
	if c.KubeAPIBurst < 0 {
		v.bad("kubeAPIBurst (--kube-api-burst) %v must not be a negative number", c.KubeAPIBurst)
	}
	if q := i32(c.KubeAPIQPS); q < 0 {
		v.bad("kubeAPIQPS (--kube-api-qps) %v must not be a negative number", q)
	}
	if n := i32(c.NodeStatusMaxImages); n < -1 {
		v.bad("nodeStatusMaxImages (--node-status-max-images) %v must be -1 or greater", n)
	}
	if c.MaxOpenFiles < 0 {
		v.bad("maxOpenFiles (--max-open-files) %v must not be a negative number", c.MaxOpenFiles)
	}
	if c.MaxPods < 0 {
		v.bad("maxPods (--max-pods) %v must not be a negative number", c.MaxPods)
	}
	if o := i32(c.OOMScoreAdj); outside(int64(o), -1000, 1000) {
		v.bad("oomScoreAdj (--oom-score-adj) %v must be between -1000 and 1000, inclusive", o)
	}
	if c.PodsPerCore < 0 {
		v.bad("podsPerCore (--pods-per-core) %v must not be a negative number", c.PodsPerCore)
	}
	if badPort(c.Port) {
		v.bad("port (--port) %v must be between 1 and 65535, inclusive", c.Port)
	}
	if c.ReadOnlyPort != 0 && badPort(c.ReadOnlyPort) {
		v.bad("readOnlyPort (--read-only-port) %v must be between 0 and 65535, inclusive", c.ReadOnlyPort)
	}
	if c.RegistryBurst < 0 {
		v.bad("registryBurst (--registry-burst) %v must not be a negative number", c.RegistryBurst)
	}
	if q := i32(c.RegistryPullQPS); q < 0 {
		v.bad("registryPullQPS (--registry-qps) %v must not be a negative number", q)
	}
	if p := c.MaxParallelImagePulls; p != nil && *p < 1 {
		v.bad("maxParallelImagePulls %v must be a positive number", *p)
	}
	if boolv(c.SerializeImagePulls) && c.MaxParallelImagePulls != nil && *c.MaxParallelImagePulls > 1 {
		v.bad("maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) is set to false")
	}
	if c.ServerTLSBootstrap && !g.Enabled(gateRotateKubeletServerCertificate) {
		v.bad("serverTLSBootstrap %v requires feature gate RotateKubeletServerCertificate", c.ServerTLSBootstrap)
	}
	if c.RunOnce {
		v.bad("runOnce (--runOnce) %v, Runonce mode has been deprecated and should not be set", c.RunOnce)
	}
	for _, t := range c.RegisterWithTaints {
		if taintError(t) {
			v.errs = append(v.errs, fmt.Errorf("invalid taint: %v", t))
		}
		if t.TimeAdded != nil {
			v.bad("taint.TimeAdded is not nil")
		}
	}
	v.checkTopology()
	v.checkShutdown()
	v.checkSwapAndBackOff()
	v.checkAllocatable()
	switch c.HairpinMode {
	case kc.HairpinNone, kc.HairpinVeth, kc.PromiscuousBridge:
	default:
		v.bad("option %q specified for hairpinMode (--hairpin-mode). Valid options are %q, %q or %q",
			c.HairpinMode, kc.HairpinNone, kc.HairpinVeth, kc.PromiscuousBridge)
	}
	v.checkImageCredentials()
	if c.ReservedSystemCPUs != "" {
		if c.SystemReservedCgroup != "" || c.KubeReservedCgroup != "" {
			v.bad("can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)")
		}
		if _, err := parseCPUSet(c.ReservedSystemCPUs); err != nil {
			v.bad("unable to parse reservedSystemCPUs (--reserved-cpus) %v, error: %w", c.ReservedSystemCPUs, err)
		}
	}
	v.checkReservedMemory()
	v.checkOS()
	if s := c.ShowHiddenMetricsForVersion; s != "" && s != previousMinor {
		v.errs = append(v.errs, fmt.Errorf("invalid showHiddenMetricsForVersion: %v",
			field.Invalid(field.NewPath("showHiddenMetricsForVersion"), s,
				fmt.Sprintf("must be omitted or have the value '%v'; only the previous minor version is allowed", previousMinor))))
	}
	v.checkLoggingTracing()
	v.checkMemoryQoS()
	v.checkLogs()
}

// previousMinor is the one showHiddenMetricsForVersion the kubelet v1.36
// accepts.
const previousMinor = "1.35"

// maxCPUSetText bounds reservedSystemCPUs before it is parsed.
const maxCPUSetText = 4096

func parseCPUSet(s string) (cpuset.CPUSet, error) {
	if len(s) > maxCPUSetText {
		return cpuset.CPUSet{}, fmt.Errorf("longer than %d characters", maxCPUSetText)
	}
	// cpuset.Parse expands ranges: bound them first ("0-20000000").
	for _, part := range strings.Split(s, ",") {
		if lo, hi, ok := strings.Cut(strings.TrimSpace(part), "-"); ok {
			var a, b int
			if _, err := fmt.Sscanf(lo+" "+hi, "%d %d", &a, &b); err == nil && b-a > maxCPUs {
				return cpuset.CPUSet{}, fmt.Errorf("range %q has more than %d CPUs", part, maxCPUs)
			}
		}
	}
	return cpuset.Parse(s)
}

// maxCPUs bounds a cpuset range.
const maxCPUs = 1 << 16

func taintError(t v1.Taint) bool {
	if len(validation.IsQualifiedName(t.Key)) > 0 {
		return true
	}
	if t.Value != "" && len(validation.IsValidLabelValue(t.Value)) > 0 {
		return true
	}
	switch t.Effect {
	case "", v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		return false
	}
	return true
}

func (v *validator) checkTopology() {
	c := v.c
	switch c.TopologyManagerPolicy {
	case kc.NoneTopologyManagerPolicy, kc.BestEffortTopologyManagerPolicy, kc.RestrictedTopologyManagerPolicy, kc.SingleNumaNodeTopologyManagerPolicy:
	default:
		v.bad("topologyManagerPolicy (--topology-manager-policy) %q must be one of: %q", c.TopologyManagerPolicy,
			[]string{kc.NoneTopologyManagerPolicy, kc.BestEffortTopologyManagerPolicy, kc.RestrictedTopologyManagerPolicy, kc.SingleNumaNodeTopologyManagerPolicy})
	}
	switch c.TopologyManagerScope {
	case kc.ContainerTopologyManagerScope, kc.PodTopologyManagerScope:
	default:
		v.bad("topologyManagerScope (--topology-manager-scope) %q must be one of: %q, or %q", c.TopologyManagerScope,
			kc.ContainerTopologyManagerScope, kc.PodTopologyManagerScope)
	}
}

func (v *validator) checkShutdown() {
	c, g := v.c, v.g
	period, critical := c.ShutdownGracePeriod, c.ShutdownGracePeriodCriticalPods
	subSecond := func(d time.Duration) bool { return d < 0 || (d > 0 && d < time.Second) }
	if g.Enabled(gateGracefulNodeShutdown) {
		if critical.Duration > period.Duration {
			v.bad("shutdownGracePeriodCriticalPods %v must be <= shutdownGracePeriod %v", critical, period)
		}
		if subSecond(period.Duration) {
			v.bad("shutdownGracePeriod %v must be either zero or otherwise >= 1 sec", period)
		}
		if subSecond(critical.Duration) {
			v.bad("shutdownGracePeriodCriticalPods %v must be either zero or otherwise >= 1 sec", critical)
		}
	} else if period.Duration > 0 || critical.Duration > 0 {
		v.bad("specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown")
	}
	byPriority := len(c.ShutdownGracePeriodByPodPriority) != 0
	if g.Enabled(gateGracefulNodeShutdownBasedOnPodPriority) {
		if byPriority && (period.Duration > 0 || critical.Duration > 0) {
			v.bad("Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time")
		}
	} else if byPriority {
		v.bad("Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority")
	}
}

func (v *validator) checkSwapAndBackOff() {
	c, g := v.c, v.g
	if g.Enabled(gateNodeSwap) {
		switch c.MemorySwap.SwapBehavior {
		case "", "NoSwap", "LimitedSwap":
		default:
			v.bad("memorySwap.swapBehavior %q must be one of: \"\", %q or %q", c.MemorySwap.SwapBehavior, "LimitedSwap", "NoSwap")
		}
	} else if c.MemorySwap != (kc.MemorySwapConfiguration{}) {
		v.bad("memorySwap.swapBehavior cannot be set when NodeSwap feature flag is disabled")
	}
	maxPeriod := c.CrashLoopBackOff.MaxContainerRestartPeriod
	if g.Enabled(gateKubeletCrashLoopBackOffMax) {
		if maxPeriod == nil {
			v.bad("FeatureGate KubeletCrashLoopBackOffMax is enabled, CrashLoopBackOff.MaxContainerRestartPeriod must be set")
		} else if outside(maxPeriod.Duration.Milliseconds(), 1000, 300000) {
			v.bad("CrashLoopBackOff.MaxContainerRestartPeriod (got: %v seconds) must be set between 1s and 300s", maxPeriod.Seconds())
		}
	} else if maxPeriod != nil {
		v.bad("FeatureGate KubeletCrashLoopBackOffMax not enabled, CrashLoopBackOff.MaxContainerRestartPeriod must not be set")
	}
}

// The enforceNodeAllocatable keys.
const (
	enforcePods                     = "pods"
	enforceSystemReserved           = "system-reserved"
	enforceSystemReservedCompressed = "system-reserved-compressible"
	enforceKubeReserved             = "kube-reserved"
	enforceKubeReservedCompressed   = "kube-reserved-compressible"
	enforceNone                     = "none"
)

func (v *validator) checkAllocatable() {
	c := v.c
	has := map[string]bool{}
	for _, k := range c.EnforceNodeAllocatable {
		has[k] = true
	}
	const field = "enforceNodeAllocatable (--enforce-node-allocatable)"
	if has[enforceSystemReservedCompressed] && has[enforceSystemReserved] {
		v.bad("both %q and %q cannot be specified together in %s", enforceSystemReserved, enforceSystemReservedCompressed, field)
	}
	if has[enforceKubeReservedCompressed] && has[enforceKubeReserved] {
		v.bad("both %q and %q cannot be specified together in %s", enforceKubeReserved, enforceKubeReservedCompressed, field)
	}
	seen := map[string]bool{}
	for _, k := range c.EnforceNodeAllocatable {
		if seen[k] {
			v.bad("duplicated enforcements %q in %s", k, field)
			continue
		}
		seen[k] = true
		switch k {
		case enforcePods:
		case enforceSystemReserved, enforceSystemReservedCompressed:
			if c.SystemReservedCgroup == "" {
				v.bad("systemReservedCgroup (--system-reserved-cgroup) must be specified when %q or %q included in %s", enforceSystemReserved, enforceSystemReservedCompressed, field)
			}
		case enforceKubeReserved, enforceKubeReservedCompressed:
			if c.KubeReservedCgroup == "" {
				v.bad("kubeReservedCgroup (--kube-reserved-cgroup) must be specified when %q or %q included in %s", enforceKubeReserved, enforceKubeReservedCompressed, field)
			}
		case enforceNone:
			if len(c.EnforceNodeAllocatable) > 1 {
				v.bad("%s may not contain additional enforcements when %q is specified", field, enforceNone)
			}
			continue
		default:
			v.bad("option %q specified for %s. Valid options are %q, %q, %q, %q, %q or %q", k, field,
				enforcePods, enforceSystemReserved, enforceSystemReservedCompressed, enforceKubeReserved, enforceKubeReservedCompressed, enforceNone)
			continue
		}
		if !boolv(c.CgroupsPerQOS) {
			v.bad("cgroupsPerQOS (--cgroups-per-qos) must be set to true when %q contained in %s", k, field)
		}
	}
}

func (v *validator) checkImageCredentials() {
	c := v.c
	policy := string(c.ImagePullCredentialsVerificationPolicy)
	if !v.g.Enabled(gateKubeletEnsureSecretPulledImages) {
		if policy != "" {
			v.bad("`imagePullCredentialsVerificationPolicy` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled")
		}
		if len(c.PreloadedImagesVerificationAllowlist) > 0 {
			v.bad("`preloadedImagesVerificationAllowlist` must not be set if KubeletEnsureSecretPulledImages feature gate is not enabled")
		}
		return
	}
	switch kc.ImagePullCredentialsVerificationPolicy(policy) {
	case kc.NeverVerify, kc.NeverVerifyPreloadedImages, kc.NeverVerifyAllowlistedImages, kc.AlwaysVerify:
	default:
		v.bad("option %q specified for imagePullCredentialsVerificationPolicy. Valid options are %q, %q, %q or %q",
			policy, kc.NeverVerify, kc.NeverVerifyPreloadedImages, kc.NeverVerifyAllowlistedImages, kc.AlwaysVerify)
	}
	if len(c.PreloadedImagesVerificationAllowlist) > 0 && kc.ImagePullCredentialsVerificationPolicy(policy) != kc.NeverVerifyAllowlistedImages {
		v.bad("can't set `preloadedImagesVerificationAllowlist` if `imagePullCredentialsVertificationPolicy` is not \"NeverVerifyAllowlistedImages\"")
		return
	}
	for _, p := range c.PreloadedImagesVerificationAllowlist {
		if err := imagePatternError(p); err != nil {
			v.bad("invalid image pattern in `preloadedImagesVerificationAllowlist`: %w", err)
			return
		}
	}
}

// imagePatternError checks one preloadedImagesVerificationAllowlist entry:
// an image name without tag or digest, or a prefix ending in "/*" with at
// least a registry host.
func imagePatternError(p string) error {
	if p != strings.TrimSpace(p) {
		return fmt.Errorf("leading/trailing spaces are not allowed: %s", p)
	}
	name, wildcard := strings.CutSuffix(p, "*")
	wildcard = wildcard && strings.HasSuffix(name, "/")
	if !wildcard {
		name = p
	}
	switch {
	case name == "":
		return fmt.Errorf("the supplied pattern is too short: %s", p)
	case strings.ContainsRune(name, '*'):
		return fmt.Errorf("not a valid wildcard pattern, only patterns ending with '/*' are allowed: %s", p)
	case wildcard && name == "/":
		return fmt.Errorf("at least registry hostname is required")
	case !wildcard && (strings.Contains(name, "@") || strings.Contains(name[strings.LastIndex(name, "/")+1:], ":")):
		return fmt.Errorf("neither tag nor digest is accepted in an image reference: %s", p)
	}
	return nil
}

func (v *validator) checkReservedMemory() {
	seen := map[int32]map[v1.ResourceName]bool{}
	for _, r := range v.c.ReservedMemory {
		if seen[r.NumaNode] == nil {
			seen[r.NumaNode] = map[v1.ResourceName]bool{}
		}
		for _, name := range sortedNames(r.Limits) {
			q := r.Limits[name]
			if name != v1.ResourceMemory && !strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				v.bad("the limit type %q for NUMA node %d is not supported, only %v is accepted", name, r.NumaNode,
					[]v1.ResourceName{v1.ResourceMemory, v1.ResourceHugePagesPrefix + "<HugePageSize>"})
			}
			if q.IsZero() {
				v.bad("reserved memory may not be zero for NUMA node %d and resource %q", r.NumaNode, name)
			}
			if seen[r.NumaNode][name] {
				v.bad("the reserved memory has a duplicate value for NUMA node %d and resource %q", r.NumaNode, name)
			}
			seen[r.NumaNode][name] = true
		}
	}
}

func sortedNames(l v1.ResourceList) []v1.ResourceName {
	out := make([]v1.ResourceName, 0, len(l))
	for n := range l {
		out = append(out, n)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// userNSUnit is the granularity of userNamespaces.idsPerPod.
const userNSUnit = 65536

// checkOS is the kubelet's Linux check: one error at most.
func (v *validator) checkOS() {
	c := v.c
	switch {
	case c.FailCgroupV1 != nil && *c.FailCgroupV1 && v.cgroupV1():
		v.errs = append(v.errs, fmt.Errorf("kubelet is configured to not run on a host using cgroup v1. cgroup v1 support is unsupported and will be removed in a future release"))
	case v.cgroupV1() && c.SingleProcessOOMKill != nil && !*c.SingleProcessOOMKill:
		v.bad("singleProcessOOMKill must not be explicitly set to false when using cgroup v1")
	case c.UserNamespaces != nil && c.UserNamespaces.IDsPerPod != nil:
		n := *c.UserNamespaces.IDsPerPod
		switch {
		case n < userNSUnit:
			v.bad("userNamespaces.idsPerPod must not be less than %d", userNSUnit)
		case n%userNSUnit != 0:
			v.bad("userNamespaces.idsPerPod must be a multiple of %d", userNSUnit)
		case n > math.MaxUint32:
			v.bad("userNamespaces.idsPerPod must not be more than %d", int64(math.MaxUint32))
		}
	}
}

func (v *validator) cgroupV1() bool { return v.opts.CgroupV1 }

// gateView shows the gates to component-base's validators.
type gateView struct{ g *gates }

func (gv gateView) Enabled(key featuregate.Feature) bool                        { return gv.g.Enabled(string(key)) }
func (gv gateView) KnownFeatures() []string                                     { return nil }
func (gv gateView) Dependencies() map[featuregate.Feature][]featuregate.Feature { return nil }
func (gv gateView) DeepCopy() featuregate.MutableVersionedFeatureGate           { return nil }
func (gv gateView) Validate() []error                                           { return nil }

func (v *validator) checkLoggingTracing() {
	logging := v.c.Logging
	if logging.Format == "json" {
		// The kubelet binary has the JSON format registered; this library
		// does not link it (the agent logs with zap), so the format's own
		// checks are skipped and the rest validated.
		logging.Format = logsapi.DefaultLogFormat
	}
	for _, e := range logsapi.Validate(&logging, gateView{v.g}, field.NewPath("logging")) {
		v.errs = append(v.errs, e)
	}
	for _, e := range tracingapi.ValidateTracingConfiguration(v.c.Tracing, gateView{v.g}, field.NewPath("tracing")) {
		v.errs = append(v.errs, e)
	}
}

func (v *validator) checkMemoryQoS() {
	c, g := v.c, v.g
	if g.Enabled(gateMemoryQoS) && c.MemoryThrottlingFactor == nil {
		v.bad("memoryThrottlingFactor is required when MemoryQoS feature flag is enabled")
	}
	if f := c.MemoryThrottlingFactor; f != nil && (*f <= 0 || *f > 1.0) {
		v.bad("memoryThrottlingFactor %v must be greater than 0 and less than or equal to 1.0", *f)
	}
	if !g.Enabled(gateMemoryQoS) && c.MemoryReservationPolicy == kc.TieredReservationMemoryReservationPolicy {
		v.bad("memoryReservationPolicy %q requires MemoryQoS feature gate to be enabled", c.MemoryReservationPolicy)
	}
	switch c.MemoryReservationPolicy {
	case kc.NoneMemoryReservationPolicy, kc.TieredReservationMemoryReservationPolicy:
	default:
		v.bad("option %q specified for memoryReservationPolicy. Valid options are %q or %q", c.MemoryReservationPolicy,
			kc.NoneMemoryReservationPolicy, kc.TieredReservationMemoryReservationPolicy)
	}
	if c.ContainerRuntimeEndpoint == "" {
		v.bad("the containerRuntimeEndpoint was not specified or empty")
	}
	if boolv(c.EnableSystemLogQuery) && !g.Enabled(gateNodeLogQuery) {
		v.bad("NodeLogQuery feature gate is required for enableSystemLogQuery")
	}
	if boolv(c.EnableSystemLogQuery) && !boolv(c.EnableSystemLogHandler) {
		v.bad("enableSystemLogHandler is required for enableSystemLogQuery")
	}
}

func (v *validator) checkLogs() {
	c := v.c
	if i32(c.ContainerLogMaxWorkers) < 1 {
		v.bad("containerLogMaxWorkers must be greater than or equal to 1")
	}
	if durv(c.ContainerLogMonitorInterval).Seconds() < 3 {
		v.bad("containerLogMonitorInterval must be a positive time duration greater than or equal to 3s")
	}
	if i32(c.ContainerLogMaxFiles) <= 1 {
		v.bad("containerLogMaxFiles must be greater than 1")
	}
	dir := c.PodLogsDir
	if dir == "" {
		v.bad("podLogsDir was not specified")
	}
	if !filepath.IsAbs(dir) {
		v.bad("pod logs path %q must be absolute path", dir)
	}
	if filepath.Clean(dir) != dir {
		v.bad("pod logs path %q must be normalized", dir)
	}
	for _, r := range dir {
		if r > unicode.MaxASCII {
			v.bad("pod logs path %q mut contains ASCII characters only", dir)
			break
		}
	}
}
