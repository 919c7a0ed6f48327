package nodekit

import (
	"errors"
	"net/netip"
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
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/syncloop"
)

// build is one run of Builder.Build: the parts made so far and the
// problems found. Each build* method makes one part from the Builder's
// settings and the parts made before it, and records its problems; a part
// whose prerequisites failed is not made (their errors are reported).
type build struct {
	b   *settings
	a   *Agent
	clk clock.WithTicker
	log *zap.Logger

	errs     []error
	logsRoot string
	// rec records events: the zap recorder on the logger plus every
	// WithEventRecorder (builder_events.go).
	rec kubetypes.EventRecorder
	// cri is the runtime as the user gave it; driven is what the parts
	// call (cri, or its instrumented wrapper with a Registerer).
	cri, driven CRI
}

// A wiring is one of the one-call wirings (WithProber, WithVolumeManager,
// WithEviction, and those of other packages given to WithWiring:
// cmwire.ContainerManager, cmwire.CPUManager, containerdwire.Events...), recorded by its With call as the hooks Build
// calls in its phases (nil: none), the wirings in one fixed order (rank),
// so the order of the With calls does not matter. Hooks are funcs, not an
// interface, so that a program that never calls a With does not link that
// part's package (an interface would make the linker keep the methods of
// every type its methods' parameters reach).
type wiring struct {
	rank int
	// early runs after the runtime is made, before the engine.
	early func(bd *build)
	// engine adjusts the runtime engine's Config.
	engine func(bd *build, cfg *kuberuntime.Config)
	// beforeLoop runs once the PLEG is made, before the loop.
	beforeLoop func(bd *build)
	// loop adjusts the sync loop's Config.
	loop func(bd *build, cfg *syncloop.Config)
	// connect is the second phase: every part is made.
	connect func(bd *build)
}

// Ranks of the wirings: the order their hooks run in.
const (
	rankProber = iota
	rankVolumes
	rankContainerMgr
	rankEviction
	rankCPU
	rankMemory
	rankContainerdEvents
	rankStats
	rankDevices
)

// wirings returns the recorded wirings in rank order. (A hand-written
// insertion sort: a generic slices call would hand wiring's type, and every
// type it reaches, to the linker as used in an interface.)
func (b *settings) wirings() []wiring {
	out := make([]wiring, 0, len(b.wired))
	for _, w := range b.wired {
		i := len(out)
		out = append(out, w)
		for ; i > 0 && out[i-1].rank > w.rank; i-- {
			out[i] = out[i-1]
		}
		out[i] = w
	}
	return out
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
	bd := &build{b: &b.settings, clk: b.clock, log: b.logger}
	if bd.clk == nil {
		bd.clk = clock.RealClock{}
	}
	if bd.log == nil {
		bd.log = defaultLogger()
	}
	bd.a = &Agent{clock: bd.clk, log: bd.log.Named("nodekit"), rootDir: b.rootDir, done: make(chan struct{})}
	bd.buildRecorder()

	bd.checkSettings()
	bd.buildRuntime()
	for _, w := range b.wirings() {
		if w.early != nil {
			w.early(bd)
		}
	}
	bd.buildEngine()
	bd.buildSources()
	bd.buildPLEG()
	for _, w := range b.wirings() {
		if w.beforeLoop != nil {
			w.beforeLoop(bd)
		}
	}
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
	bd.checkNodeIPs()
	if b.volumeMgr != nil && (b.volumes != nil || b.mounts != nil) {
		bd.fail(configErr("builder", "WithVolumeManager and WithVolumes both given: use one"))
	}
	if b.podCgroups != nil && (b.cgroups != nil || b.cgroupParents != nil) {
		bd.fail(configErr("builder", "%s and WithCgroups both given: use one", b.podCgroupsCall))
	}
	for _, p := range b.parts {
		if p.name == "" || p.run == nil {
			bd.fail(configErr("builder", "WithPart: a part needs a name and a run func"))
		}
	}
}

// checkNodeIPs checks WithNodeIPs: IP addresses (no zone, not
// unspecified), at most one per family.
func (bd *build) checkNodeIPs() {
	ips := bd.b.nodeIPs
	if len(ips) > 2 {
		bd.fail(configErr("builder", "WithNodeIPs: %d addresses given, at most two (one per IP family)", len(ips)))
		return
	}
	var families []bool
	for _, s := range ips {
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			bd.fail(configErr("builder", "WithNodeIPs: %q is not an IP address", s))
			continue
		case a.Zone() != "":
			bd.fail(configErr("builder", "WithNodeIPs: %q has a zone", s))
			continue
		case a.IsUnspecified():
			bd.fail(configErr("builder", "WithNodeIPs: %q is the unspecified address", s))
			continue
		}
		families = append(families, a.Unmap().Is4())
	}
	if len(families) == 2 && families[0] == families[1] {
		bd.fail(configErr("builder", "WithNodeIPs: %q and %q are of the same IP family (give at most one per family)", ips[0], ips[1]))
	}
}

// nodeIPs returns what gives the node's IPs to the status generator and
// the env fieldRefs: WithNodeIPs's (canonical form), else the cluster's,
// else nil.
func (bd *build) nodeIPs() func() []string {
	if len(bd.b.nodeIPs) > 0 {
		ips := make([]string, 0, len(bd.b.nodeIPs))
		for _, s := range bd.b.nodeIPs {
			if a, err := netip.ParseAddr(s); err == nil {
				ips = append(ips, a.Unmap().String())
			}
		}
		return func() []string { return ips }
	}
	for _, c := range bd.b.clusters {
		if c.NodeIPs != nil {
			return c.NodeIPs
		}
	}
	return nil
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
			a.remote, bd.cri, a.endpoint = c, c, b.endpoint
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
		NodeAllocatable: b.allocatable, Clock: bd.clk, Logger: bd.log, Registerer: b.registerer,
		Mounts: b.mounts, CgroupParents: b.cgroupParents, Probes: b.probeResults,
		HostIPs:  bd.nodeIPs(),
		Recorder: bd.rec,
	}
	for _, w := range b.wirings() {
		if w.engine != nil {
			w.engine(bd, &cfg)
		}
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
		case s.make == nil && s.build == nil:
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
		if err := a.addFileSource(b.manifestDir, b.nodeName, b.filePeriod, bd.clk, bd.log, bd.sourceError(kubetypes.SourceFile)); err != nil {
			bd.fail(err)
		}
	}
	for _, s := range sources {
		if s.name == "" || (s.make == nil && s.build == nil) {
			continue
		}
		ch, err := pc.Channel(s.name)
		if err != nil {
			bd.fail(partErr("podconfig source "+s.name, err))
			continue
		}
		var src PodSource
		if s.build != nil {
			src, err = s.build(bd, ch)
		} else {
			src, err = s.make(ch)
		}
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
		NodeAllocatable: b.allocatable,
		Clock:           bd.clk,
		Logger:          bd.log,
		Registerer:      b.registerer,
		Rand:            b.rand,
		Volumes:         b.volumes,
		Cgroups:         b.cgroups,
		Probes:          b.probes,
		ProbeState:      b.probeState,
		StatusGenerator: podstatus.Generator{NodeIPsFunc: bd.nodeIPs()},
		Recorder:        bd.rec,
	}
	if complete {
		cfg.Runtime, cfg.PLEG, cfg.Events = a.mgr, a.pleg, a.pleg.Watch()
	}
	if b.idleMemoryRelease {
		release := b.idleRelease
		if release == nil {
			release = freeOSMemory
		}
		cfg.Idle = idleRelease(release, bd.clk, bd.log)
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
	for _, w := range b.wirings() {
		if w.loop != nil {
			w.loop(bd, &cfg)
		}
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

// connect is the second phase: every part is made; each wiring connects
// its part (the volume manager learns the agent's pods, the managers list
// the state they load before the first pod is admitted) and lists what the
// Agent runs, then the caller's parts, the cluster's and those built from
// the Agent (WithAgentPart) (in this order,
// after the PLEG and before the sync loop; stopped in reverse).
func (bd *build) connect() {
	b, a := bd.b, bd.a
	for _, w := range b.wirings() {
		if w.connect != nil {
			w.connect(bd)
		}
	}
	bd.buildLogRotation()
	a.parts = append(a.parts, b.parts...)
	bd.nodeReady()
	bd.clusterParts()
	bd.agentParts()
}
