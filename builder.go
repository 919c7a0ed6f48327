package nodekit

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volumemgr"
)

// CRI is a container runtime as the Builder takes it: both halves of the CRI
// that the runtime engine uses. runtime/remote's *Client and runtime/fake's
// *Runtime satisfy it. If it also has Status (the CRI Status call) the sync
// loop uses it to tell whether the runtime and its network are ready.
type CRI interface {
	kuberuntime.RuntimeService
	kuberuntime.ImageService
}

// RuntimeStatuser is the optional CRI Status call of a CRI.
type RuntimeStatuser interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// PodSource is a source of pods the Agent runs: it sends kubetypes.PodUpdates
// (normally a SET of all its pods) into the channel it was built with until
// ctx ends. podconfig's FileSource and HTTPSource satisfy it.
type PodSource interface {
	Run(ctx context.Context) error
}

// PodSourceFunc builds a PodSource that sends into out (the channel
// podconfig.PodConfig.Channel gives for the source's name). It is called by
// Build and must do no I/O.
type PodSourceFunc func(out chan<- kubetypes.PodUpdate) (PodSource, error)

type namedSource struct {
	name string
	make PodSourceFunc
	// build, for the Builder's own sources, makes the source with the
	// build's clock, logger and error reporting.
	build func(bd *build, out chan<- kubetypes.PodUpdate) (PodSource, error)
}

// Builder collects the settings of an Agent. Its With methods return the
// Builder so calls chain; nothing is checked until Build, which reports every
// problem at once.
type Builder struct {
	settings
}

// settings are what the With calls record. Build's phases read them
// through *settings, never through *Builder: a Builder's exported methods
// are kept by the linker when *Builder is reachable by reflection, and
// they reference every optional part, which a minimal agent must not link.
type settings struct {
	nodeName    string
	nodeIPs     []string
	cri         CRI
	withCRI     bool
	endpoint    string
	useFake     bool
	fakeImages  []string
	runtimes    int
	manifestDir string
	// filePeriod and urlPeriod: WithManifestPeriods (builder_sources.go).
	filePeriod, urlPeriod time.Duration
	sources               []namedSource
	// sourceErrors receives what the sources refuse (WithSourceErrors).
	sourceErrors func(source string, err error)
	mode         podconfig.Mode
	rootDir      string
	podLogsRoot  string
	sink         podstatus.Sink
	admitters    []syncloop.AdmitHandler
	readyChecks  []func() error // WithNodeReadyCheck (builder_nodeready.go)
	allocatable  func() v1.ResourceList
	clock        clock.WithTicker
	logger       *zap.Logger
	registerer   prometheus.Registerer
	rand         func() float64
	// idleMemoryRelease: WithIdleMemoryRelease; idleRelease replaces
	// freeOSMemory in tests.
	idleMemoryRelease bool
	idleRelease       func()

	volumes       syncloop.VolumeHooks
	mounts        kuberuntime.MountProvider
	cgroups       syncloop.CgroupHooks
	cgroupParents kuberuntime.CgroupParentProvider
	probes        syncloop.ProbeHooks
	probeState    podstatus.ProbeState
	probeResults  kuberuntime.ProbeResults
	runtimeEdits  []func(*kuberuntime.Config)
	loopEdits     []func(*syncloop.Config)
	parts         []extraPart
	agentParts    []agentPart
	eventedPLEG   bool
	relistPLEG    bool
	recorders     []kubetypes.EventRecorder
	logRotation   *logs.Config // WithContainerLogRotation (builder_logs.go)

	// The one-call wirings, recorded by their With call and built by Build
	// (build.go) in one fixed order, whatever the order of the calls.
	wired      []wiring
	withProber bool
	volumeMgr  *volumemgr.Manager
	// wiredCalls are the Calls of the WithWiring wirings, podCgroups the
	// container manager's cgroups one of them gave (builder_wiring.go).
	wiredCalls     []string
	podCgroups     PodCgroups
	podCgroupsCall string
	deviceMgr      DeviceManager
	withEviction   bool
	withStats      bool
	clusters       []Cluster
	// misuse holds the problems of With calls (a nil manager, a call made
	// twice), reported by Build with the rest.
	misuse []error
}

// NewBuilder returns a Builder with no settings.
func NewBuilder() *Builder { return &Builder{} }

// WithNodeName sets the node's name (required): static pods are named
// "<name>-<node>" and bound to it.
func (b *Builder) WithNodeName(name string) *Builder { b.nodeName = name; return b }

// WithNodeIPs gives the node's IP addresses (the kubelet's --node-ip): at
// most two, one per IP family, the primary first. Every pod's
// status.hostIP and hostIPs are set from them, host-network pods get them as
// their pod IPs, and the env fieldRefs status.hostIP and status.hostIPs
// resolve to them. Without it the cluster's (Cluster.NodeIPs) are used,
// else pods get no host IPs (as the kubelet without an API server).
func (b *Builder) WithNodeIPs(ips ...string) *Builder {
	b.nodeIPs = append(b.nodeIPs, ips...)
	return b
}

// WithRuntime uses cri as the container runtime (already connected or
// connecting lazily). Exactly one of WithRuntime, WithRuntimeEndpoint and
// WithFakeRuntime must be given.
func (b *Builder) WithRuntime(cri CRI) *Builder {
	b.cri, b.withCRI = cri, true
	b.runtimes++
	return b
}

// WithRuntimeEndpoint uses the CRI runtime listening at endpoint
// ("unix:///run/containerd/containerd.sock"). Build only checks the address;
// the Agent connects when it runs and closes the connection when it stops.
func (b *Builder) WithRuntimeEndpoint(endpoint string) *Builder {
	b.endpoint = endpoint
	b.runtimes++
	return b
}

// WithFakeRuntime uses runtime/fake's in-memory runtime, on the Builder's
// clock, with the given images present from the start (others are pulled
// on demand). Agent.FakeRuntime returns it.
func (b *Builder) WithFakeRuntime(images ...string) *Builder {
	b.useFake = true
	b.fakeImages = append(b.fakeImages, images...)
	b.runtimes++
	return b
}

// WithManifestDir runs the static pods of the manifests in path (a directory
// or one file), re-read on every change (podconfig.FileSource).
func (b *Builder) WithManifestDir(path string) *Builder { b.manifestDir = path; return b }

// WithPodSource adds a pod source under name. make is called by Build with
// the channel the source must send into.
func (b *Builder) WithPodSource(name string, make PodSourceFunc) *Builder {
	b.sources = append(b.sources, namedSource{name: name, make: make})
	return b
}

// WithNotificationMode sets podconfig's notification mode (default
// podconfig.Incremental, the kubelet's).
func (b *Builder) WithNotificationMode(m podconfig.Mode) *Builder { b.mode = m; return b }

// WithRootDir sets the agent's state directory (required; the kubelet's
// --root-dir, /var/lib/kubelet).
func (b *Builder) WithRootDir(dir string) *Builder { b.rootDir = dir; return b }

// WithPodLogsRoot sets where container logs are written (default
// <root>/pod-logs; the kubelet uses /var/log/pods).
func (b *Builder) WithPodLogsRoot(dir string) *Builder { b.podLogsRoot = dir; return b }

// WithStatusSink sets where pod statuses go (default a
// podstatus.MemorySink, see Agent.StatusSink).
func (b *Builder) WithStatusSink(s podstatus.Sink) *Builder { b.sink = s; return b }

// WithAdmitHandler adds an admission check run on every new pod, in the
// order given.
func (b *Builder) WithAdmitHandler(h syncloop.AdmitHandler) *Builder {
	b.admitters = append(b.admitters, h)
	return b
}

// WithNodeAllocatable gives the node's allocatable resources: the sync loop
// rejects pods whose requests don't fit (OutOfcpu, OutOfmemory, ...), and the
// runtime uses them for resourceFieldRef env values of containers without
// limits. Without it the resource-fit check is skipped.
func (b *Builder) WithNodeAllocatable(f func() v1.ResourceList) *Builder {
	b.allocatable = f
	return b
}

// WithClock sets the clock of every part (default the real clock).
func (b *Builder) WithClock(c clock.WithTicker) *Builder { b.clock = c; return b }

// WithLogger sets the logger; each part logs under its own name. The
// default writes warnings and errors to standard error (bad manifests,
// unreachable sources, failing parts), nothing below; pass zap.NewNop() for
// silence.
func (b *Builder) WithLogger(l *zap.Logger) *Builder { b.logger = l; return b }

// WithEventedPLEG makes the agent follow the runtime's container events
// (CRI GetContainerEvents) with a pleg.EventedPLEG, relisting only rarely
// as a safety net, when the runtime offers the event stream; otherwise the
// agent relists as usual (pleg.GenericPLEG). A runtime that has the method
// but answers Unimplemented (containerd 1.6) makes the EventedPLEG fall back
// to relisting at run time, so the option is harmless there. It is the
// default for a runtime reached over the CRI (see WithRelistPLEG).
func (b *Builder) WithEventedPLEG() *Builder { b.eventedPLEG = true; return b }

// WithRegisterer registers every part's metrics with r (default none),
// among them the kubelet's CRI operation metrics: the parts then call the
// runtime through kuberuntime.Instrument (Agent.CRI still returns the runtime
// itself). One Registerer serves one Agent: a second Build on it fails.
func (b *Builder) WithRegisterer(r prometheus.Registerer) *Builder { b.registerer = r; return b }

// WithRand makes r (a number in [0,1) per call) the agent's random source
// for jitter: the pod workers' resync and retry delays (stretched by
// r()*50%) and the prober's first delay of each probe (r() of its period).
// The default is math/rand/v2. A test that must be exact passes a
// constant, e.g. func() float64 { return 0 } (see package nodekittest).
// A nil r restores the default. The node status and lease jitter of
// clusterapiserver.Wire take their source from its Config.Rand.
func (b *Builder) WithRand(r func() float64) *Builder { b.rand = r; return b }

func configErr(part, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, part, fmt.Sprintf(format, args...))
}

func partErr(part string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, part, err)
}

func (a *Agent) addFileSource(path, node string, period time.Duration, clk clock.WithTicker, log *zap.Logger, onError func(error)) error {
	ch, err := a.podConfig.Channel(kubetypes.SourceFile)
	if err != nil {
		return partErr("podconfig", err)
	}
	fs, err := podconfig.NewFileSource(podconfig.FileSourceConfig{
		Path: path, NodeName: node, Period: period, Clock: clk, Logger: log, Out: ch,
		// The file source logs each refused manifest itself, once and
		// saying whether a last good version keeps running.
		OnError: func(_ string, err error) {
			if onError != nil {
				onError(err)
			}
		},
	})
	if err != nil {
		return partErr("podconfig file source", err)
	}
	a.sources = append(a.sources, sourceRun{name: kubetypes.SourceFile, src: fs})
	return nil
}
