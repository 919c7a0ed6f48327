package kubeletconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"runtime"
	"sort"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kc "k8s.io/kubelet/config/v1beta1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/syncloop"
)

// Part maps fields of the configuration to a part of the agent that is
// wired outside Apply: the node API server (exserver in the examples), a
// cluster (clusterapiserver), graceful node shutdown, certificates. Apply
// calls Apply with the validated configuration; the fields it names are
// then supported (not warned about).
type Part struct {
	// Name names the part in errors.
	Name string
	// Fields are the top-level JSON names of the fields the part maps
	// ("nodeStatusUpdateFrequency").
	Fields []string
	// Apply wires the part on b from c; nil when the program wires it
	// itself from c (the fields are then only marked supported).
	Apply func(b *nodekit.Builder, c *kc.KubeletConfiguration) error
}

// The fields of the parts nodekit wires outside this package, for their
// Parts. Graceful node shutdown and certificate rotation are wired by their
// own packages: a program that has them adds a Part with these fields and
// an Apply that configures them from the file; without such a Part, a
// non-default value of these fields is named in the warning.
const (
	// ShutdownFields: graceful node shutdown (its grace periods).
	ShutdownFields = "shutdownGracePeriod shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority"
	// CertificateFields: client certificate rotation and serving
	// certificates through CSRs.
	CertificateFields = "rotateCertificates serverTLSBootstrap"
)

// Options says what the agent has beyond what Apply maps itself.
type Options struct {
	// Validate are the host facts for Validate.
	Validate ValidateOptions
	// Runtime: containerRuntimeEndpoint is the agent's runtime
	// (WithRuntimeEndpoint), and the container log rotation fields apply
	// to it. Leave it false when the program chose the runtime itself (the
	// fake runtime): those fields are then supported only at their
	// defaults.
	Runtime bool
	// Parts map the fields of the parts wired outside Apply.
	Parts []Part
	// Logger gets the one warning at start naming the fields set to a
	// value other than the kubelet's default that nothing maps (default:
	// no logging; the warning is also in Applied.Unsupported).
	Logger *zap.Logger
	// NumCPU is the number of CPUs podsPerCore counts (default
	// runtime.NumCPU()).
	NumCPU int
}

// Applied is what Apply did.
type Applied struct {
	// Config is the effective configuration, validated.
	Config *kc.KubeletConfiguration
	// Unsupported are the fields (JSON names, sorted) set to a value other
	// than the kubelet's default that no part of the agent maps: they are
	// ignored, and were named in one warning.
	Unsupported []string
}

// Configz returns the effective configuration as /configz serves it
// (server.Config.Configz wraps it in {"kubeletconfig": ...}).
func (a *Applied) Configz() (any, error) { return a.Config.DeepCopy(), nil }

// Apply validates c (Validate) and maps its fields to b, the way the
// kubelet would run with them:
//
//   - syncFrequency: the pod workers' resync (WithSyncLoopConfig);
//   - fileCheckFrequency, httpCheckFrequency: WithManifestPeriods;
//   - staticPodPath: WithManifestDir; staticPodURL and staticPodURLHeader:
//     WithManifestURL;
//   - podLogsDir: WithPodLogsRoot;
//   - maxPods and podsPerCore: pods over the limit are refused at
//     admission (OutOfpods, as the kubelet's resource fit);
//   - serializeImagePulls and maxParallelImagePulls: image pulls one at a
//     time, or at most that many at once;
//   - runtimeRequestTimeout, clusterDNS, clusterDomain, resolvConf,
//     seccompDefault, crashLoopBackOff.maxContainerRestartPeriod: the
//     runtime engine (WithRuntimeConfig);
//   - with Options.Runtime, containerRuntimeEndpoint (WithRuntimeEndpoint)
//     and the container log rotation fields (WithContainerLogRotation);
//   - the fields of Options.Parts, by those parts.
//
// featureGates, failCgroupV1 and the rest that only the validation reads
// are supported. Every other field set to a value other than the kubelet's
// default is named in one warning (Options.Logger, Applied.Unsupported)
// and ignored. A value the agent cannot honour is an error
// (ErrCannotHonour); Apply returns every problem at once, validation's
// first.
func Apply(b *nodekit.Builder, c *kc.KubeletConfiguration, opts Options) (*Applied, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: no configuration", ErrInvalid)
	}
	var errs []error
	if err := Validate(c, opts.Validate); err != nil {
		var inv *InvalidError
		if errors.As(err, &inv) {
			errs = append(errs, inv.Errors...)
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, &InvalidError{Errors: errs}
	}
	supported := map[string]bool{}
	for _, f := range alwaysSupported() {
		supported[f] = true
	}
	cannot := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrCannotHonour, field, fmt.Sprintf(format, args...)))
	}
	c = c.DeepCopy()

	b.WithSyncLoopConfig(func(cfg *syncloop.Config) { cfg.ResyncInterval = c.SyncFrequency.Duration })
	b.WithManifestPeriods(c.FileCheckFrequency.Duration, c.HTTPCheckFrequency.Duration)
	if c.StaticPodPath != "" {
		b.WithManifestDir(c.StaticPodPath)
	}
	if c.StaticPodURL != "" {
		b.WithManifestURL(c.StaticPodURL, http.Header(c.StaticPodURLHeader))
	} else if len(c.StaticPodURLHeader) > 0 {
		supported["staticPodURLHeader"] = false
	}
	b.WithPodLogsRoot(c.PodLogsDir)
	b.WithAdmitHandler(maxPodsAdmitter(c, opts.NumCPU))
	pulls := 0 // no limit
	if *c.SerializeImagePulls {
		pulls = 1
	} else if c.MaxParallelImagePulls != nil {
		pulls = int(*c.MaxParallelImagePulls)
	}
	resolv := *c.ResolverConfig
	if resolv == "" {
		resolv = "-" // the kubelet's "" is no resolv.conf
	}
	b.WithRuntimeConfig(func(cfg *kuberuntime.Config) {
		cfg.CallTimeout = c.RuntimeRequestTimeout.Duration
		cfg.DNS = kuberuntime.DNSConfig{ClusterDNS: append([]string(nil), c.ClusterDNS...), ClusterDomain: c.ClusterDomain, ResolvConf: resolv}
		cfg.SeccompDefault = *c.SeccompDefault
		if p := c.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil {
			cfg.BackOffMax = p.Duration
		}
		if pulls > 0 && cfg.Images != nil {
			cfg.Images = newPullLimiter(cfg.Images, pulls)
		}
	})
	if c.ImageServiceEndpoint != "" && c.ImageServiceEndpoint != c.ContainerRuntimeEndpoint {
		cannot("imageServiceEndpoint", "%q: the agent takes images from its runtime's endpoint", c.ImageServiceEndpoint)
	}
	if opts.Runtime {
		for _, f := range []string{"containerRuntimeEndpoint", "containerLogMaxSize", "containerLogMaxFiles", "containerLogMaxWorkers", "containerLogMonitorInterval"} {
			supported[f] = true
		}
		b.WithRuntimeEndpoint(c.ContainerRuntimeEndpoint)
		size, err := resource.ParseQuantity(c.ContainerLogMaxSize)
		switch {
		case len(c.ContainerLogMaxSize) > 64 || err != nil:
			cannot("containerLogMaxSize", "%q is not a quantity", c.ContainerLogMaxSize)
		default:
			b.WithContainerLogRotation(logs.Config{MaxSize: size.Value(), MaxFiles: int(*c.ContainerLogMaxFiles),
				MonitorInterval: c.ContainerLogMonitorInterval.Duration, Workers: int(*c.ContainerLogMaxWorkers)})
		}
	}
	for _, p := range opts.Parts {
		for _, f := range p.Fields {
			supported[f] = true
		}
		if p.Apply == nil {
			continue
		}
		if err := p.Apply(b, c); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	a := &Applied{Config: c, Unsupported: Unsupported(c, supported)}
	if len(a.Unsupported) > 0 && opts.Logger != nil {
		opts.Logger.Warn("KubeletConfiguration: this agent does not support these fields, set to other values than the kubelet's defaults; they are ignored",
			zap.Strings("fields", a.Unsupported))
	}
	return a, nil
}

// alwaysSupported are the fields Apply maps whatever the Options, and the
// ones only defaulting and validation read.
func alwaysSupported() []string {
	return []string{"syncFrequency", "fileCheckFrequency", "httpCheckFrequency", "staticPodPath", "staticPodURL", "staticPodURLHeader",
		"podLogsDir", "maxPods", "podsPerCore", "serializeImagePulls", "maxParallelImagePulls",
		"runtimeRequestTimeout", "clusterDNS", "clusterDomain", "resolvConf", "seccompDefault", "crashLoopBackOff",
		"imageServiceEndpoint", "failCgroupV1", "showHiddenMetricsForVersion",
	}
}

// Unsupported returns the top-level fields of c (JSON names, sorted) whose
// value differs from the kubelet's default and that supported does not
// name. featureGates is named when it sets a gate to other than its
// default: the agent has none of the kubelet's gated features.
func Unsupported(c *kc.KubeletConfiguration, supported map[string]bool) []string {
	def := &kc.KubeletConfiguration{FeatureGates: c.FeatureGates}
	SetDefaults(def)
	have, want := fieldsOf(c), fieldsOf(def)
	var out []string
	for name, v := range have {
		if supported[name] || name == "featureGates" {
			continue
		}
		if !reflect.DeepEqual(v, want[name]) {
			out = append(out, name)
		}
	}
	if g := defaultGates(nil); len(c.FeatureGates) > 0 {
		for name, on := range c.FeatureGates {
			if g.Enabled(name) != on {
				out = append(out, "featureGates")
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// fieldsOf returns c's top-level fields as JSON values by name.
func fieldsOf(c *kc.KubeletConfiguration) map[string]any {
	data, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil
	}
	delete(m, "kind")
	delete(m, "apiVersion")
	return m
}

// maxPodsAdmitter refuses a pod when the node already runs its maximum:
// maxPods, or podsPerCore times the CPUs when that is lower, as the
// kubelet's resource fit does with the node's "pods" capacity.
func maxPodsAdmitter(c *kc.KubeletConfiguration, numCPU int) syncloop.AdmitHandler {
	limit := int64(c.MaxPods)
	if numCPU <= 0 {
		numCPU = runtime.NumCPU()
	}
	if c.PodsPerCore > 0 {
		limit = min(limit, int64(c.PodsPerCore)*int64(numCPU))
	}
	return syncloop.AdmitFunc(func(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
		n := int64(len(active))
		if n+1 <= limit {
			return syncloop.AdmitResult{Admit: true}
		}
		return syncloop.AdmitResult{Reason: "OutOfpods",
			Message: fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", n, limit)}
	})
}

// pullLimiter lets at most n image pulls run at once (the kubelet's
// serialized puller for n = 1, its parallel puller's limit otherwise); a
// pull waiting for its turn gives up when its context ends.
type pullLimiter struct {
	kuberuntime.ImageService
	sem chan struct{}
}

func newPullLimiter(is kuberuntime.ImageService, n int) *pullLimiter {
	return &pullLimiter{ImageService: is, sem: make(chan struct{}, n)}
}

func (p *pullLimiter) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	select {
	case p.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-p.sem }()
	return p.ImageService.PullImage(ctx, image, auth, sandbox)
}

// FieldsOf lists field names for Part.Fields from JSON names separated by
// spaces or commas.
func FieldsOf(names string) []string {
	return strings.FieldsFunc(names, func(r rune) bool { return r == ' ' || r == ',' || r == '\n' })
}
