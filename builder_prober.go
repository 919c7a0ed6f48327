package nodekit

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/podstatus"
	"github.com/nodekit/nodekit/prober"
	"github.com/nodekit/nodekit/syncloop"
)

// WithProber runs the containers' liveness, readiness and startup probes
// with a prober.Manager built on the agent's runtime (exec probes go
// through its ExecSync) and the sync loop's status manager: a liveness or
// startup failure restarts the container, readiness sets Ready, the
// startup probe sets Started. edits may adjust the prober's Config (probe
// kinds, jitter) after the Builder filled it in. It replaces WithProbes.
func (b *Builder) WithProber(edits ...func(*prober.Config)) *Builder {
	if b.withProber {
		return b.fail("WithProber given twice")
	}
	b.withProber = true
	w := &proberWiring{edits: edits}
	b.wired = append(b.wired, wiring{rank: rankProber, early: w.early, engine: w.engine, loop: w.loop, connect: w.connect})
	return b
}

// proberWiring makes the prober.Manager of WithProber before the engine:
// exec probes through the CRI, pod statuses from the agent's status
// manager (read through the Agent, whose loop is made later in Build).
type proberWiring struct {
	edits   []func(*prober.Config)
	m       *prober.Manager
	updates chan syncloop.ProbeUpdate
}

func (w *proberWiring) early(bd *build) {
	b := bd.b
	if b.probes != nil || b.probeState != nil || b.probeResults != nil {
		bd.fail(configErr("builder", "WithProber and WithProbes both given: use one"))
		return
	}
	cfg := prober.Config{Status: agentStatuses{bd.a}, Clock: bd.clk, Logger: b.logger, Registerer: b.registerer, Recorder: bd.rec}
	if r := b.rand; r != nil {
		cfg.Jitter = func(p time.Duration) time.Duration { return time.Duration(r() * float64(p)) }
	}
	if bd.cri != nil {
		cfg.Exec = bd.cri
	}
	for _, edit := range w.edits {
		edit(&cfg)
	}
	m, err := prober.New(cfg)
	if err != nil {
		bd.fail(partErr("prober", err))
		return
	}
	w.m, bd.a.prober = m, m
}

func (w *proberWiring) engine(_ *build, cfg *kuberuntime.Config) {
	if w.m != nil {
		cfg.Probes = w.m.RuntimeResults()
	}
}

func (w *proberWiring) loop(_ *build, cfg *syncloop.Config) {
	if w.m != nil {
		w.updates = make(chan syncloop.ProbeUpdate)
		cfg.Probes, cfg.ProbeState, cfg.ProbeResults = w.m, w.m.StatusResults(), w.updates
	}
}

func (w *proberWiring) connect(bd *build) {
	bd.a.parts = append(bd.a.parts, extraPart{name: "prober", run: runProber(w.m, w.updates)})
}

// agentStatuses is the prober's view of the agent's pod statuses.
type agentStatuses struct{ a *Agent }

func (s agentStatuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	if s.a.loop == nil {
		return v1.PodStatus{}, false
	}
	return s.a.loop.StatusManager().GetPodStatus(uid)
}

var (
	_ syncloop.ProbeHooks      = (*prober.Manager)(nil)
	_ podstatus.ProbeState     = prober.StatusResults{}
	_ kuberuntime.ProbeResults = prober.RuntimeResults{}
)

// runProber runs the prober and forwards its result changes to the sync
// loop until ctx ends; it returns once both have stopped.
func runProber(m *prober.Manager, out chan<- syncloop.ProbeUpdate) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case u := <-m.Updates():
					select {
					case out <- toLoopUpdate(u):
					case <-ctx.Done():
						return
					}
				}
			}
		})
		err := m.Run(ctx)
		wg.Wait()
		return err
	}
}

func toLoopUpdate(u prober.Update) syncloop.ProbeUpdate {
	t := syncloop.ProbeLiveness
	switch u.Type {
	case prober.Readiness:
		t = syncloop.ProbeReadiness
	case prober.Startup:
		t = syncloop.ProbeStartup
	}
	return syncloop.ProbeUpdate{PodUID: u.PodUID, ContainerID: u.ContainerID, Type: t, Result: u.Result}
}

// Prober returns the probe manager made by WithProber, or nil.
func (a *Agent) Prober() *prober.Manager { return a.prober }
