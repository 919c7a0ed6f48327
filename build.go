package nodekit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/syncloop"
)

// build is one run of Builder.Build: the parts made so far and the
// problems found. Each build* method makes one part from the Builder's
// settings and the parts made before it, and records its problems; a part
// whose prerequisites failed is not made (their errors are reported).
type build struct {
	b   *Builder
	a   *Agent
	clk clock.WithTicker
	log *zap.Logger

	errs     []error
	logsRoot string
	// cri is the runtime as the user gave it; driven is what the parts
	// call (cri, or its instrumented wrapper with a Registerer).
	cri, driven   CRI
	evictionParts *EvictionParts
	probeUpdates  chan syncloop.ProbeUpdate
}

func (bd *build) fail(err error) { bd.errs = append(bd.errs, err) }

// Build checks every setting and builds every part by calling its New, so
// that each part validates its own configuration. It returns all problems at
// once (errors.Join), each naming the part and the field. Build starts
// nothing and does no I/O.
//
// It works in two phases. First every part is made, in one fixed order
// whatever the order of the With calls: the runtime, the prober, the runtime
// engine, the pod sources, the PLEG, eviction, the sync loop. A part that
// needs one made after it (the prober needs the status manager, eviction
// the pod workers) takes a method of the Agent, which reads that part once
// Build has finished. Then, with every part made, connect hands the parts
// to one another (the volume manager learns the agent's pods) and lists
// what the Agent runs.
func (b *Builder) Build() (*Agent, error) {
	bd := &build{b: b, clk: b.clock, log: b.logger}
	if bd.clk == nil {
		bd.clk = clock.RealClock{}
	}
	if bd.log == nil {
		bd.log = zap.NewNop()
	}
	bd.a = &Agent{clock: bd.clk, log: bd.log.Named("nodekit"), done: make(chan struct{})}

	bd.checkSettings()
	bd.buildRuntime()
	bd.buildProber()
	bd.buildEngine()
	bd.buildSources()
	bd.buildPLEG()
	bd.buildEvictionPart()
	bd.buildLoop()
	if len(bd.errs) == 0 {
		bd.connect()
	}
	if len(bd.errs) > 0 {
		return nil, errors.Join(bd.errs...)
	}
	return bd.a, nil
}

// checkSettings checks the settings no part checks for itself.
func (bd *build) checkSettings() {
	b := bd.b
	bd.errs = append(bd.errs, b.misuse...)
	if b.nodeName == "" {
		bd.fail(configErr("builder", "NodeName is required (WithNodeName)"))
	}
	if b.rootDir == "" {
		bd.fail(configErr("builder", "RootDir is required (WithRootDir)"))
	} else if !filepath.IsAbs(b.rootDir) {
		bd.fail(configErr("builder", "RootDir %q must be an absolute path", b.rootDir))
	}
	bd.logsRoot = b.podLogsRoot
	if bd.logsRoot == "" && b.rootDir != "" {
		bd.logsRoot = filepath.Join(b.rootDir, "pod-logs")
	}
	if b.volumeMgr != nil && (b.volumes != nil || b.mounts != nil) {
		bd.fail(configErr("builder", "WithVolumeManager and WithVolumes both given: use one"))
	}
	if b.containerMgr != nil && (b.cgroups != nil || b.cgroupParents != nil) {
		bd.fail(configErr("builder", "WithContainerManager and WithCgroups both given: use one"))
	}
	for _, p := range b.parts {
		if p.name == "" || p.run == nil {
			bd.fail(configErr("builder", "WithPart: a part needs a name and a run func"))
		}
	}
}

// buildRuntime makes or takes the container runtime and, with a
// Registerer, wraps it to count and time every CRI call
// (kubelet_runtime_operations_*).
func (bd *build) buildRuntime() {
	b, a := bd.b, bd.a
	switch {
	case b.runtimes == 0:
		bd.fail(configErr("builder", "no runtime: use WithRuntime, WithRuntimeEndpoint or WithFakeRuntime"))
	case b.runtimes > 1:
		bd.fail(configErr("builder", "%d runtimes given: use exactly one of WithRuntime, WithRuntimeEndpoint and WithFakeRuntime", b.runtimes))
	case b.withCRI:
		if b.cri == nil {
			bd.fail(configErr("builder", "WithRuntime was given a nil runtime"))
		}
		bd.cri = b.cri
	case b.useFake:
		f, err := fake.New(fake.Config{Clock: bd.clk, Images: b.fakeImages, Logger: bd.log})
		if err != nil {
			bd.fail(partErr("runtime/fake", err))
		} else {
			a.fake, bd.cri = f, f
		}
	default:
		c, err := remote.New(remote.Config{Endpoint: b.endpoint, Clock: bd.clk, Logger: bd.log})
		if err != nil {
			bd.fail(partErr("runtime/remote", err))
		} else {
			a.remote, bd.cri = c, c
		}
	}
	a.cri, bd.driven = bd.cri, bd.cri
	if bd.cri != nil && b.registerer != nil {
		w, err := kuberuntime.Instrument(kuberuntime.InstrumentConfig{Runtime: bd.cri, Images: bd.cri, Registerer: b.registerer, Clock: bd.clk})
		if err != nil {
			bd.fail(partErr("runtime metrics", err))
		} else {
			bd.driven = w
		}
	}
}

// buildEngine makes the runtime engine (pods to CRI calls), with the
// mounts, cgroup parents, probe results and cpusets of the wired managers.
func (bd *build) buildEngine() {
	b := bd.b
	if bd.driven == nil {
		return
	}
	cfg := kuberuntime.Config{
		Runtime: bd.driven, Images: bd.driven, PodLogsRoot: bd.logsRoot, NodeName: b.nodeName,
		NodeAllocatable: bd.allocatable(), Clock: bd.clk, Logger: bd.log, Registerer: b.registerer,
		Mounts: b.mounts, CgroupParents: b.cgroupParents, Probes: b.probeResults,
	}
	if b.volumeMgr != nil {
		cfg.Mounts = b.volumeMgr
	}
	if b.containerMgr != nil {
		cfg.CgroupParents = b.containerMgr
	}
	if m := bd.a.prober; m != nil {
		cfg.Probes = m.RuntimeResults()
	}
	if b.cpuMgr != nil {
		cfg.CPUSets = b.cpuMgr
	}
	if filepath.IsAbs(b.rootDir) {
		cfg.PodsDir = filepath.Join(b.rootDir, syncloop.PodsDirName)
	}
	for _, edit := range b.runtimeEdits {
		edit(&cfg)
	}
	m, err := kuberuntime.New(cfg)
	if err != nil {
		bd.fail(partErr("runtime", err))
		return
	}
	bd.a.mgr = m
}

// allocatable is the node's allocatable resources: the container
// manager's, else WithNodeAllocatable's.
func (bd *build) allocatable() func() v1.ResourceList {
	if bd.b.containerMgr != nil {
		return bd.b.containerMgr.NodeAllocatable
	}
	return bd.b.allocatable
}

// buildSources makes the merge of the pod sources and the sources: the
// manifest directory, each WithPodSource, and the cluster's API source.
func (bd *build) buildSources() {
	b, a := bd.b, bd.a
	sources := b.sources
	for _, c := range b.clusters {
		sources = append(sources, namedSource{name: kubetypes.SourceAPI, make: c.PodSource})
	}
	var names []string
	if b.manifestDir != "" {
		names = append(names, kubetypes.SourceFile)
	}
	seen := map[string]bool{}
	for _, s := range sources {
		switch {
		case s.name == "":
			bd.fail(configErr("builder", "WithPodSource: empty source name"))
		case s.name == kubetypes.SourceFile && b.manifestDir != "", seen[s.name]:
			bd.fail(configErr("builder", "WithPodSource: source %q given twice", s.name))
		case s.make == nil:
			bd.fail(configErr("builder", "WithPodSource(%q): nil source func", s.name))
		default:
			names = append(names, s.name)
		}
		seen[s.name] = true
	}
	pc, err := podconfig.New(podconfig.Config{Mode: b.mode, Sources: names, Clock: bd.clk, Logger: bd.log, Registerer: b.registerer})
	if err != nil {
		bd.fail(partErr("podconfig", err))
		return
	}
	a.podConfig = pc
	if b.manifestDir != "" {
		if err := a.addFileSource(b.manifestDir, b.nodeName, bd.clk, bd.log); err != nil {
			bd.fail(err)
		}
	}
	for _, s := range sources {
		if s.name == "" || s.make == nil {
			continue
		}
		ch, err := pc.Channel(s.name)
		if err != nil {
			bd.fail(partErr("podconfig source "+s.name, err))
			continue
		}
		src, err := s.make(ch)
		if err == nil && src == nil {
			err = errors.New("the source func returned a nil PodSource")
		}
		if err != nil {
			bd.fail(partErr("podconfig source "+s.name, err))
			continue
		}
		a.sources = append(a.sources, sourceRun{name: s.name, src: src})
	}
}

// buildPLEG makes the PLEG over the runtime engine: the evented one when
// WithEventedPLEG was given and the runtime offers container events.
func (bd *build) buildPLEG() {
	a := bd.a
	if a.mgr == nil {
		return
	}
	cfg := pleg.Config{Runtime: a.mgr, Clock: bd.clk, Logger: bd.log, Registerer: bd.b.registerer}
	if src, ok := bd.driven.(pleg.EventSource); ok && bd.b.wantEventedPLEG(bd.cri) {
		ev, err := pleg.NewEvented(pleg.EventedConfig{Config: cfg, Events: src})
		if err != nil {
			bd.fail(partErr("pleg", err))
			return
		}
		a.generic, a.evented, a.pleg = ev.Generic(), ev, ev
		return
	}
	g, err := pleg.New(cfg)
	if err != nil {
		bd.fail(partErr("pleg", err))
		return
	}
	a.generic, a.pleg = g, g
}

// buildLoop makes the sync loop with its pod workers and status manager,
// wired to the runtime engine, the PLEG and the optional parts.
func (bd *build) buildLoop() {
	b, a := bd.b, bd.a
	// Without the runtime engine or the PLEG (their problems are already
	// reported) the loop is not made, but its own settings are still
	// checked, so that Build reports every problem at once.
	complete := a.mgr != nil && a.pleg != nil && a.podConfig != nil
	a.updates = make(chan kubetypes.PodUpdate)
	cfg := syncloop.Config{
		NodeName:        b.nodeName,
		Updates:         a.updates,
		SourcesReady:    a.sourcesReady,
		StatusSink:      b.sink,
		Root:            b.rootDir,
		NodeAllocatable: bd.allocatable(),
		Clock:           bd.clk,
		Logger:          bd.log,
		Registerer:      b.registerer,
		Volumes:         b.volumes,
		Cgroups:         b.cgroups,
		Probes:          b.probes,
		ProbeState:      b.probeState,
	}
	if complete {
		cfg.Runtime, cfg.PLEG, cfg.Events = a.mgr, a.pleg, a.pleg.Watch()
	}
	if cfg.StatusSink == nil {
		for _, c := range b.clusters {
			if c.StatusSink != nil {
				cfg.StatusSink = c.StatusSink
			}
		}
	}
	if st, ok := bd.driven.(RuntimeStatuser); ok {
		cfg.RuntimeStatus = st
	}
	if m := b.volumeMgr; m != nil {
		cfg.Volumes = m
	}
	if m := b.containerMgr; m != nil {
		cfg.Cgroups = m
	}
	if m := a.prober; m != nil {
		bd.probeUpdates = make(chan syncloop.ProbeUpdate)
		cfg.Probes, cfg.ProbeState, cfg.ProbeResults = m, m.StatusResults(), bd.probeUpdates
	}
	// Admission: eviction's, the CPU and memory managers', then the
	// caller's, after the loop's own resource fit and host ports.
	if p := bd.evictionParts; p != nil {
		cfg.Admitters = append(cfg.Admitters, admitWith(p.Manager.Admit))
	}
	if m := b.cpuMgr; m != nil {
		cfg.Admitters = append(cfg.Admitters, admitWith(m.Admit))
		cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	}
	if m := b.memoryMgr; m != nil {
		cfg.Admitters = append(cfg.Admitters, admitWith(m.Admit))
		cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
	}
	cfg.Admitters = append(cfg.Admitters, b.admitters...)
	for _, edit := range b.loopEdits {
		edit(&cfg)
	}
	loop, err := syncloop.New(cfg)
	if !complete {
		err = withoutMissing(err, "Runtime", "PLEG")
	}
	if err != nil {
		bd.fail(partErr("syncloop", err))
		return
	}
	if complete {
		a.loop = loop
	}
}

// withoutMissing drops from a joined config error the problems "<field> is
// required" of the given fields: consequences of a problem already
// reported (a part that could not be made), not problems of their own.
func withoutMissing(err error, fields ...string) error {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var keep []error
outer:
	for _, e := range joined.Unwrap() {
		for _, f := range fields {
			if strings.HasSuffix(e.Error(), f+" is required") {
				continue outer
			}
		}
		keep = append(keep, e)
	}
	return errors.Join(keep...)
}

// admitWith turns a manager's Admit into a sync loop admission check.
func admitWith(admit func(pod *v1.Pod, active []*v1.Pod) (bool, string, string)) syncloop.AdmitHandler {
	return syncloop.AdmitFunc(func(pod *v1.Pod, active []*v1.Pod) syncloop.AdmitResult {
		ok, reason, msg := admit(pod, active)
		return syncloop.AdmitResult{Admit: ok, Reason: reason, Message: msg}
	})
}

// connect is the second phase: every part is made; the volume manager
// learns the agent's pods, the state the managers load before the first
// pod is admitted is listed, and so are the parts the Agent runs (in this
// order, after the PLEG and before the sync loop; stopped in reverse).
func (bd *build) connect() {
	b, a := bd.b, bd.a
	if m := b.volumeMgr; m != nil {
		m.SetPodSource(a.loop, a.loop.PodWorkers(), a.podConfig.SeenAllSources)
		a.parts = append(a.parts, extraPart{name: "volumemgr", run: m.Run})
	}
	if m := b.containerMgr; m != nil {
		a.starters = append(a.starters, func(ctx context.Context) error {
			// The runtime's cgroup driver wins over the configured one.
			if err := adoptRuntimeCgroupDriver(ctx, a.cri, m, a.log); err != nil {
				return fmt.Errorf("nodekit: the runtime's cgroup driver: %w", err)
			}
			if err := m.Start(ctx); err != nil {
				return fmt.Errorf("nodekit: starting the container manager: %w", err)
			}
			return nil
		})
		a.parts = append(a.parts, extraPart{name: "containermgr", run: m.Run})
	}
	if m := b.cpuMgr; m != nil {
		a.starters = append(a.starters, func(ctx context.Context) error {
			if err := m.Start(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the CPU manager: %w", err)
			}
			return nil
		})
		a.parts = append(a.parts, extraPart{name: "cpumanager", run: m.Run})
	}
	if m := b.memoryMgr; m != nil {
		a.starters = append(a.starters, func(ctx context.Context) error {
			if err := m.StartWithActivePods(ctx, a.ActivePods); err != nil {
				return fmt.Errorf("nodekit: starting the memory manager: %w", err)
			}
			return nil
		})
	}
	if m := a.prober; m != nil {
		a.parts = append(a.parts, extraPart{name: "prober", run: runProber(m, bd.probeUpdates)})
	}
	if p := bd.evictionParts; p != nil {
		if p.ImageGC != nil {
			a.parts = append(a.parts, extraPart{name: "imagegc", run: p.ImageGC.Run})
		}
		a.parts = append(a.parts, extraPart{name: "eviction", run: p.Manager.Run})
	}
	bd.buildContainerdEvents()
	a.parts = append(a.parts, b.parts...)
	bd.clusterParts()
}
