package fake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

var (
	_ cri.RuntimeService      = (*Runtime)(nil)
	_ cri.ImageManagerService = (*Runtime)(nil)
)

// ExecHandler scripts ExecSync: it gets the container id and the command and
// returns the output and the exit code. A non-nil err is returned as is (not
// as an exit code).
type ExecHandler func(containerID string, cmd []string) (stdout, stderr []byte, exitCode int32, err error)

// Config configures a fake Runtime. The zero value is usable.
type Config struct {
	// Clock drives timestamps, simulated processes, stop timeouts and
	// injected delays. Default clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). The fake logs under "runtime.fake".
	Logger *zap.Logger

	// RuntimeName and RuntimeVersion are what Version reports
	// (default "fake" and "0.1.0"; RuntimeApiVersion is always "v1").
	RuntimeName    string
	RuntimeVersion string

	// Images are present from the start (names like "busybox" or
	// "registry.k8s.io/pause:3.10"; they are normalized as containerd does).
	Images []string
	// Missing images can't be pulled: PullImage fails with an error naming
	// the image. Pullable, when not empty, makes every image not in it
	// missing too. By default every image can be pulled.
	Missing  []string
	Pullable []string
	// ImageSize is the size every image reports (default 10 MiB).
	ImageSize uint64
	// RequireImages makes CreateContainer fail with NotFound when the
	// container's image is not present, as containerd does. Off by default so
	// tests can create containers without pulling.
	RequireImages bool
	// ImageBehaviors scripts the containers of an image (key: image name)
	// in the behaviour annotation syntax; see the package documentation.
	ImageBehaviors map[string]string

	// DefaultCPUMillicores is the CPU a container burns while running
	// (default 10). DefaultMemoryBytes its working set (default 2 MiB).
	DefaultCPUMillicores uint64
	DefaultMemoryBytes   uint64

	// HostIP, when set, is reported as the IP of host-network sandboxes;
	// by default they report none, as containerd does (the agent gives
	// host-network pods the node's IPs). PodCIDR is the pool other pods
	// get IPs from (default "10.88.0.0/16").
	HostIP  string
	PodCIDR string
	// RuntimeHandlers, when not empty, are the only runtime handlers
	// RunPodSandbox accepts ("" is always accepted).
	RuntimeHandlers []string
	// CgroupDriver is what RuntimeConfig reports: "cgroupfs" (default) or "systemd".
	CgroupDriver string

	// NetworkNotReady and RuntimeNotReady make Status report the condition false.
	NetworkNotReady bool
	RuntimeNotReady bool
	// EventsUnimplemented makes GetContainerEvents return Unimplemented, and
	// RuntimeConfigUnimplemented RuntimeConfig (both as containerd 1.6 does).
	EventsUnimplemented        bool
	RuntimeConfigUnimplemented bool

	// ExecHandler scripts ExecSync (also settable with SetExecHandler).
	// Default: exit 1 for `false`, 0 for anything else, no output.
	ExecHandler ExecHandler

	// RemoveRunningFails makes RemoveContainer of a running container fail
	// with FailedPrecondition. By default it is killed and removed, as the
	// CRI spec says and containerd does.
	RemoveRunningFails bool

	// MaxCalls bounds the call record (default 256, 14 KB; the
	// oldest half is dropped when full), so a fake that runs for long keeps
	// only its recent calls. CountCalls counts every call regardless.
	MaxCalls int
}

// Runtime is an in-memory CRI runtime: it satisfies cri-api's RuntimeService
// and ImageManagerService. Create it with New. It is safe for concurrent use.
type Runtime struct {
	clock clock.Clock
	log   *zap.Logger

	name, version      string
	imageSize          uint64
	requireImages      bool
	defaultCPU         uint64
	defaultMemory      uint64
	hostIP             string
	podPrefix          netip.Prefix
	handlers           map[string]bool
	cgroupDriver       runtimeapi.CgroupDriver
	eventsUnimpl       bool
	runtimeCfgUnimpl   bool
	missing            map[string]bool
	pullable           map[string]bool
	imageBehaviors     map[string]patch
	maxCalls           int
	removeRunningFails bool

	mu             sync.Mutex
	sandboxes      map[string]*sandbox
	sandboxOrder   []*sandbox
	containers     map[string]*container
	containerOrder []*container
	images         map[string]*image // by id
	imageNames     map[string]string // normalized name -> id
	pulls          []Pull
	usedIPs        map[netip.Addr]bool
	nextIP         netip.Addr
	faults         map[string]*fault
	calls          []Call
	counts         map[string]int
	subs           map[*subscriber]struct{}
	execHandler    ExecHandler
	streams        Streamer
	logMu          sync.Mutex               // serialises AppendLog's file writes
	attached       map[string][]*attachment // by container id
	networkReady   bool
	runtimeReady   bool
}

// New validates cfg, fills defaults and returns a Runtime. It starts nothing.
func New(cfg Config) (*Runtime, error) {
	r := &Runtime{
		clock:              cfg.Clock,
		log:                cfg.Logger,
		name:               cfg.RuntimeName,
		version:            cfg.RuntimeVersion,
		imageSize:          cfg.ImageSize,
		requireImages:      cfg.RequireImages,
		defaultCPU:         cfg.DefaultCPUMillicores,
		defaultMemory:      cfg.DefaultMemoryBytes,
		hostIP:             cfg.HostIP,
		eventsUnimpl:       cfg.EventsUnimplemented,
		runtimeCfgUnimpl:   cfg.RuntimeConfigUnimplemented,
		maxCalls:           cfg.MaxCalls,
		removeRunningFails: cfg.RemoveRunningFails,
		sandboxes:          map[string]*sandbox{},
		containers:         map[string]*container{},
		images:             map[string]*image{},
		imageNames:         map[string]string{},
		usedIPs:            map[netip.Addr]bool{},
		faults:             map[string]*fault{},
		counts:             map[string]int{},
		subs:               map[*subscriber]struct{}{},
		attached:           map[string][]*attachment{},
		execHandler:        cfg.ExecHandler,
		networkReady:       !cfg.NetworkNotReady,
		runtimeReady:       !cfg.RuntimeNotReady,
	}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	r.log = r.log.Named("runtime.fake")
	if r.name == "" {
		r.name = "fake"
	}
	if r.version == "" {
		r.version = "0.1.0"
	}
	if r.imageSize == 0 {
		r.imageSize = 10 << 20
	}
	if r.defaultCPU == 0 {
		r.defaultCPU = 10
	}
	if r.defaultMemory == 0 {
		r.defaultMemory = 2 << 20
	}
	if r.maxCalls <= 0 {
		r.maxCalls = 256
	}
	var errs []error
	if _, err := netip.ParseAddr(r.hostIP); err != nil && r.hostIP != "" {
		errs = append(errs, fmt.Errorf("%w: HostIP %q: %v", ErrInvalidConfig, cfg.HostIP, err))
	}
	cidr := cfg.PodCIDR
	if cidr == "" {
		cidr = "10.88.0.0/16"
	}
	prefix, err := netip.ParsePrefix(cidr)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: PodCIDR %q: %v", ErrInvalidConfig, cfg.PodCIDR, err))
	}
	r.podPrefix = prefix.Masked()
	if err == nil && r.podPrefix.Bits() > r.podPrefix.Addr().BitLen()-2 {
		errs = append(errs, fmt.Errorf("%w: PodCIDR %q is too small", ErrInvalidConfig, cfg.PodCIDR))
	}
	r.nextIP = r.podPrefix.Addr().Next().Next() // .1 is the gateway
	switch strings.ToLower(cfg.CgroupDriver) {
	case "", "cgroupfs":
		r.cgroupDriver = runtimeapi.CgroupDriver_CGROUPFS
	case "systemd":
		r.cgroupDriver = runtimeapi.CgroupDriver_SYSTEMD
	default:
		errs = append(errs, fmt.Errorf("%w: CgroupDriver %q: want cgroupfs or systemd", ErrInvalidConfig, cfg.CgroupDriver))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(cfg.RuntimeHandlers) > 0 {
		r.handlers = map[string]bool{"": true}
		for _, h := range cfg.RuntimeHandlers {
			r.handlers[h] = true
		}
	}
	r.missing = nameSet(cfg.Missing)
	if len(cfg.Pullable) > 0 {
		r.pullable = nameSet(cfg.Pullable)
	}
	r.imageBehaviors = make(map[string]patch, len(cfg.ImageBehaviors))
	for name, spec := range cfg.ImageBehaviors {
		p, err := parseBehavior(spec)
		if err != nil {
			return nil, fmt.Errorf("%w: ImageBehaviors[%q]: %v", ErrInvalidConfig, name, err)
		}
		r.imageBehaviors[normalizeImage(name)] = p
	}
	for i, name := range cfg.Images {
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("%w: Images[%d] is empty", ErrInvalidConfig, i)
		}
		r.addImageLocked(name)
	}
	return r, nil
}

func nameSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[normalizeImage(n)] = true
	}
	return m
}

func (r *Runtime) nowNano() int64 { return r.clock.Now().UnixNano() }

// Version reports the runtime name and version; the API version is "v1".
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	if err := r.begin(ctx, "Version", "", apiVersion, 0); err != nil {
		return nil, err
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: r.name, RuntimeVersion: r.version, RuntimeApiVersion: "v1"}, nil
}

// Status reports the RuntimeReady and NetworkReady conditions.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if err := r.begin(ctx, "Status", "", "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	rt, nw := r.runtimeReady, r.networkReady
	r.mu.Unlock()
	cond := func(typ string, ok bool, reason string) *runtimeapi.RuntimeCondition {
		c := &runtimeapi.RuntimeCondition{Type: typ, Status: ok}
		if !ok {
			c.Reason, c.Message = reason, "fake runtime: condition set to false"
		}
		return c
	}
	resp := &runtimeapi.StatusResponse{
		Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			cond(runtimeapi.RuntimeReady, rt, "RuntimeNotReady"),
			cond(runtimeapi.NetworkReady, nw, "NetworkPluginNotReady"),
		}},
		RuntimeHandlers: []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{}}},
		Features:        &runtimeapi.RuntimeFeatures{},
	}
	for _, h := range slices.Sorted(maps.Keys(r.handlers)) {
		if h != "" {
			resp.RuntimeHandlers = append(resp.RuntimeHandlers, &runtimeapi.RuntimeHandler{Name: h, Features: &runtimeapi.RuntimeHandlerFeatures{}})
		}
	}
	return resp, nil
}

// SetNetworkReady sets the NetworkReady condition Status reports.
func (r *Runtime) SetNetworkReady(ready bool) {
	r.mu.Lock()
	r.networkReady = ready
	r.mu.Unlock()
}

// SetRuntimeReady sets the RuntimeReady condition Status reports.
func (r *Runtime) SetRuntimeReady(ready bool) {
	r.mu.Lock()
	r.runtimeReady = ready
	r.mu.Unlock()
}

// RuntimeConfig reports the cgroup driver (or Unimplemented if configured so).
func (r *Runtime) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	if err := r.begin(ctx, "RuntimeConfig", "", "", 0); err != nil {
		return nil, err
	}
	if r.runtimeCfgUnimpl {
		return nil, unimplemented("RuntimeConfig")
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: r.cgroupDriver}}, nil
}

// UpdateRuntimeConfig accepts and ignores the config (the pod CIDR).
func (r *Runtime) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	return r.begin(ctx, "UpdateRuntimeConfig", "", "", 0)
}

// Close does nothing: the fake holds no connection.
func (r *Runtime) Close(ctx context.Context) error { return nil }

// CheckpointContainer is not offered by the fake.
func (r *Runtime) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	if err := r.begin(ctx, "CheckpointContainer", req.GetContainerId(), "", 0); err != nil {
		return err
	}
	return unimplemented("CheckpointContainer")
}

// ListMetricDescriptors is not offered by the fake.
func (r *Runtime) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	if err := r.begin(ctx, "ListMetricDescriptors", "", "", 0); err != nil {
		return nil, err
	}
	return nil, unimplemented("ListMetricDescriptors")
}

// ListPodSandboxMetrics is not offered by the fake.
func (r *Runtime) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	if err := r.begin(ctx, "ListPodSandboxMetrics", "", "", 0); err != nil {
		return nil, err
	}
	return nil, unimplemented("ListPodSandboxMetrics")
}
