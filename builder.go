package nodekit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/syncloop"
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
}

// Builder collects the settings of an Agent. Its With methods return the
// Builder so calls chain; nothing is checked until Build, which reports every
// problem at once.
type Builder struct {
	nodeName    string
	cri         CRI
	withCRI     bool
	endpoint    string
	useFake     bool
	fakeImages  []string
	runtimes    int
	manifestDir string
	sources     []namedSource
	mode        podconfig.Mode
	rootDir     string
	podLogsRoot string
	sink        syncloop.StatusSink
	admitters   []syncloop.AdmitHandler
	allocatable func() v1.ResourceList
	clock       clock.WithTicker
	logger      *zap.Logger
	registerer  prometheus.Registerer

	volumes       syncloop.VolumeHooks
	mounts        kuberuntime.MountProvider
	cgroups       syncloop.CgroupHooks
	cgroupParents kuberuntime.CgroupParentProvider
	probes        syncloop.ProbeHooks
	probeState    syncloop.ProbeState
	probeResults  kuberuntime.ProbeResults
	runtimeEdits  []func(*kuberuntime.Config)
	loopEdits     []func(*syncloop.Config)
	parts         []extraPart
	// afterBuild finish parts that need the built Agent (the prober needs
	// the status manager); run only when everything else built.
	afterBuild []func(*Agent) error

	eventedPLEG bool
	relistPLEG  bool
}

// NewBuilder returns a Builder with no settings.
func NewBuilder() *Builder { return &Builder{} }

// WithNodeName sets the node's name (required): static pods are named
// "<name>-<node>" and bound to it.
func (b *Builder) WithNodeName(name string) *Builder { b.nodeName = name; return b }

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
// syncloop.MemorySink, see Agent.StatusSink).
func (b *Builder) WithStatusSink(s syncloop.StatusSink) *Builder { b.sink = s; return b }

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

// WithLogger sets the logger; each part logs under its own name
// (default no logging).
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

func configErr(part, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, part, fmt.Sprintf(format, args...))
}

func partErr(part string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalidConfig, part, err)
}

// Build checks every setting and builds every part by calling its New, so
// that each part validates its own configuration. It returns all problems at
// once (errors.Join), each naming the part and the field. Build starts
// nothing and does no I/O.
func (b *Builder) Build() (*Agent, error) {
	var errs []error
	clk := b.clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	log := b.logger
	if log == nil {
		log = zap.NewNop()
	}
	a := &Agent{clock: clk, log: log.Named("nodekit"), done: make(chan struct{})}

	if b.nodeName == "" {
		errs = append(errs, configErr("builder", "NodeName is required (WithNodeName)"))
	}
	if b.rootDir == "" {
		errs = append(errs, configErr("builder", "RootDir is required (WithRootDir)"))
	} else if !filepath.IsAbs(b.rootDir) {
		errs = append(errs, configErr("builder", "RootDir %q must be an absolute path", b.rootDir))
	}
	logsRoot := b.podLogsRoot
	if logsRoot == "" && b.rootDir != "" {
		logsRoot = filepath.Join(b.rootDir, "pod-logs")
	}

	// The container runtime.
	var cri CRI
	switch {
	case b.runtimes == 0:
		errs = append(errs, configErr("builder", "no runtime: use WithRuntime, WithRuntimeEndpoint or WithFakeRuntime"))
	case b.runtimes > 1:
		errs = append(errs, configErr("builder", "%d runtimes given: use exactly one of WithRuntime, WithRuntimeEndpoint and WithFakeRuntime", b.runtimes))
	case b.withCRI:
		if b.cri == nil {
			errs = append(errs, configErr("builder", "WithRuntime was given a nil runtime"))
		}
		cri = b.cri
	case b.useFake:
		f, err := fake.New(fake.Config{Clock: clk, Images: b.fakeImages, Logger: log})
		if err != nil {
			errs = append(errs, partErr("runtime/fake", err))
		} else {
			a.fake, cri = f, f
		}
	default:
		c, err := remote.New(remote.Config{Endpoint: b.endpoint, Clock: clk, Logger: log})
		if err != nil {
			errs = append(errs, partErr("runtime/remote", err))
		} else {
			a.remote, cri = c, c
		}
	}

	// With a Registerer, the parts drive the runtime through a wrapper that
	// counts and times every CRI call (kubelet_runtime_operations_*).
	driven := cri
	if cri != nil && b.registerer != nil {
		w, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: cri, Images: cri, Registerer: b.registerer, Clock: clk})
		if err != nil {
			errs = append(errs, partErr("runtime metrics", err))
		} else {
			driven = w
		}
	}

	// The runtime engine. Its PodState comes from the pod workers, which
	// exist only once the sync loop is built: podState forwards to them.
	ps := &podState{}
	var mgr *kuberuntime.Manager
	if cri != nil {
		rcfg := kuberuntime.Config{
			Runtime: driven, Images: driven, PodLogsRoot: logsRoot, NodeName: b.nodeName,
			PodState: ps, NodeAllocatable: b.allocatable, Clock: clk, Logger: log, Registerer: b.registerer,
			Mounts: b.mounts, CgroupParents: b.cgroupParents, Probes: b.probeResults,
		}
		if filepath.IsAbs(b.rootDir) {
			rcfg.PodsDir = filepath.Join(b.rootDir, syncloop.PodsDirName)
		}
		for _, edit := range b.runtimeEdits {
			edit(&rcfg)
		}
		m, err := kuberuntime.New(rcfg)
		if err != nil {
			errs = append(errs, partErr("runtime", err))
		} else {
			mgr = m
		}
	}
	a.cri, a.mgr = cri, mgr

	// Pod sources and their merge.
	var names []string
	if b.manifestDir != "" {
		names = append(names, kubetypes.SourceFile)
	}
	seen := map[string]bool{}
	for _, s := range b.sources {
		switch {
		case s.name == "":
			errs = append(errs, configErr("builder", "WithPodSource: empty source name"))
		case s.name == kubetypes.SourceFile && b.manifestDir != "", seen[s.name]:
			errs = append(errs, configErr("builder", "WithPodSource: source %q given twice", s.name))
		case s.make == nil:
			errs = append(errs, configErr("builder", "WithPodSource(%q): nil source func", s.name))
		default:
			names = append(names, s.name)
		}
		seen[s.name] = true
	}
	pc, err := podconfig.New(podconfig.Config{
		Mode: b.mode, Sources: names, Clock: clk, Logger: log, Registerer: b.registerer,
	})
	if err != nil {
		errs = append(errs, partErr("podconfig", err))
	} else {
		a.podConfig = pc
		if b.manifestDir != "" {
			if err := a.addFileSource(b.manifestDir, b.nodeName, clk, log); err != nil {
				errs = append(errs, err)
			}
		}
		for _, s := range b.sources {
			if s.name == "" || s.make == nil {
				continue
			}
			ch, err := pc.Channel(s.name)
			if err != nil {
				errs = append(errs, partErr("podconfig source "+s.name, err))
				continue
			}
			src, err := s.make(ch)
			if err == nil && src == nil {
				err = errors.New("the source func returned a nil PodSource")
			}
			if err != nil {
				errs = append(errs, partErr("podconfig source "+s.name, err))
				continue
			}
			a.sources = append(a.sources, sourceRun{name: s.name, src: src})
		}
	}

	// The PLEG. A part that failed above is replaced by a typed nil so the
	// next parts still validate the rest of their configuration.
	var g podLifecycle
	pcfg := pleg.Config{Runtime: orNil(mgr), Clock: clk, Logger: log, Registerer: b.registerer}
	if src, ok := driven.(pleg.EventSource); ok && b.wantEventedPLEG(cri) {
		ev, err := pleg.NewEvented(pleg.EventedConfig{Config: pcfg, Events: src})
		if err != nil {
			errs = append(errs, partErr("pleg", err))
		} else {
			a.generic, a.evented, g = ev.Generic(), ev, ev
		}
	} else {
		gen, err := pleg.New(pcfg)
		if err != nil {
			errs = append(errs, partErr("pleg", err))
		} else {
			a.generic, g = gen, gen
		}
	}
	a.pleg = g

	// The sync loop with the pod workers and the status manager.
	a.updates = make(chan kubetypes.PodUpdate)
	a.events = make(chan *kubetypes.PodLifecycleEvent, pleg.DefaultChannelCapacity)
	lcfg := syncloop.Config{
		NodeName:        b.nodeName,
		Updates:         a.updates,
		Events:          a.events,
		SourcesReady:    a.sourcesReady,
		Runtime:         mgr,
		StatusSink:      b.sink,
		Root:            b.rootDir,
		Admitters:       b.admitters,
		NodeAllocatable: b.allocatable,
		Clock:           clk,
		Logger:          log,
		Registerer:      b.registerer,
		Volumes:         b.volumes,
		Cgroups:         b.cgroups,
		Probes:          b.probes,
		ProbeState:      b.probeState,
	}
	if st, ok := driven.(RuntimeStatuser); ok {
		lcfg.RuntimeStatus = st
	}
	if g != nil {
		lcfg.Cache = g.Cache()
		lcfg.PLEGHealthy = g.Healthy
		lcfg.RequestRelist = g.RequestRelist
		lcfg.ObservePodStatus = g.ObservePodStatus
		lcfg.HoldPod, lcfg.ReleasePod = g.HoldPod, g.ReleasePod
		if mgr != nil {
			lcfg.RuntimePods = recentListing(g, mgr, clk)
		}
	} else {
		lcfg.Cache = pleg.NewCache(clk) // a stand-in: the Agent is discarded
	}
	for _, edit := range b.loopEdits {
		edit(&lcfg)
	}
	loop, err := syncloop.New(lcfg)
	if err != nil {
		errs = append(errs, partErr("syncloop", err))
	}
	a.loop = loop
	ps.loop = loop

	for _, p := range b.parts {
		if p.name == "" || p.run == nil {
			errs = append(errs, configErr("builder", "WithPart: a part needs a name and a run func"))
			continue
		}
		a.parts = append(a.parts, p)
	}

	if len(errs) == 0 {
		for _, f := range b.afterBuild {
			if err := f(a); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return a, nil
}

func (a *Agent) addFileSource(path, node string, clk clock.WithTicker, log *zap.Logger) error {
	ch, err := a.podConfig.Channel(kubetypes.SourceFile)
	if err != nil {
		return partErr("podconfig", err)
	}
	fs, err := podconfig.NewFileSource(podconfig.FileSourceConfig{
		Path: path, NodeName: node, Clock: clk, Logger: log, Out: ch,
		OnError: func(path string, err error) {
			a.log.Warn("manifest not applied; the last good version keeps running", zap.String("path", path), zap.Error(err))
		},
	})
	if err != nil {
		return partErr("podconfig file source", err)
	}
	a.sources = append(a.sources, sourceRun{name: kubetypes.SourceFile, src: fs})
	return nil
}

// orNil gives pleg a non-nil Runtime when the runtime failed to build, so
// that pleg's own checks still run (the Agent is discarded in that case).
func orNil(m *kuberuntime.Manager) pleg.Runtime {
	if m == nil {
		return (*kuberuntime.Manager)(nil)
	}
	return m
}

// podState is the runtime engine's view of the pod workers, for garbage
// collection. loop is set once by Build before anything runs.
type podState struct{ loop *syncloop.Loop }

func (p *podState) ShouldPodContentBeRemoved(uid types.UID) bool {
	return p.loop != nil && p.loop.PodWorkers().ShouldPodContentBeRemoved(uid)
}

func (p *podState) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	return p.loop != nil && p.loop.PodWorkers().ShouldPodRuntimeBeRemoved(uid)
}

// listingMaxAge is how old a PLEG listing housekeeping may use instead of
// listing the runtime itself (the kubelet's runtime cache keeps its
// listing as long).
const listingMaxAge = 2 * time.Second

// recentListing lists the runtime's pods from the PLEG's last relist when
// it started at most listingMaxAge ago, else from the runtime.
func recentListing(g interface {
	Listing() ([]*kubetypes.Pod, time.Time)
}, mgr interface {
	GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error)
}, clk clock.PassiveClock) func(context.Context) ([]*kubetypes.Pod, error) {
	return func(ctx context.Context) ([]*kubetypes.Pod, error) {
		if pods, at := g.Listing(); !at.IsZero() && clk.Since(at) <= listingMaxAge {
			return pods, nil
		}
		return mgr.GetPods(ctx, true)
	}
}
