package nodekit

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
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
	link := &proberLink{updates: make(chan syncloop.ProbeUpdate)}
	b.WithProbes(link, link, runtimeProbeView{link})
	b.WithSyncLoopConfig(func(c *syncloop.Config) { c.ProbeResults = link.updates })
	b.afterBuild = append(b.afterBuild, func(a *Agent) error {
		cfg := prober.Config{
			Status:     a.loop.StatusManager(),
			Clock:      a.clock,
			Logger:     b.logger,
			Registerer: b.registerer,
		}
		if a.cri != nil {
			cfg.Exec = a.cri
		}
		for _, edit := range edits {
			edit(&cfg)
		}
		m, err := prober.New(cfg)
		if err != nil {
			return partErr("prober", err)
		}
		link.set(m)
		a.prober = m
		return nil
	})
	return b.WithPart("prober", link.run)
}

// proberLink stands in for the prober.Manager while Build runs (the sync
// loop and the runtime take their probe interfaces before the Manager can
// exist), and forwards the Manager's updates to the sync loop.
type proberLink struct {
	mu      sync.RWMutex
	m       *prober.Manager
	updates chan syncloop.ProbeUpdate
}

var (
	_ syncloop.ProbeHooks      = (*proberLink)(nil)
	_ podstatus.ProbeState     = (*proberLink)(nil)
	_ kuberuntime.ProbeResults = runtimeProbeView{}
	_ podstatus.ProbeState     = prober.StatusResults{}
	_ kuberuntime.ProbeResults = prober.RuntimeResults{}
)

func (l *proberLink) set(m *prober.Manager) {
	l.mu.Lock()
	l.m = m
	l.mu.Unlock()
}

func (l *proberLink) get() *prober.Manager {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.m
}

func (l *proberLink) AddPod(pod *v1.Pod) {
	if m := l.get(); m != nil {
		m.AddPod(pod)
	}
}

func (l *proberLink) RemovePod(pod *v1.Pod) {
	if m := l.get(); m != nil {
		m.RemovePod(pod)
	}
}

// CleanupPods stops the probe workers of pods not in desired (housekeeping).
func (l *proberLink) CleanupPods(desired map[types.UID]struct{}) {
	if m := l.get(); m != nil {
		m.CleanupPods(desired)
	}
}

func (l *proberLink) StopLivenessAndStartup(pod *v1.Pod) {
	if m := l.get(); m != nil {
		m.StopLivenessAndStartup(pod)
	}
}

// Startup and Readiness are the sync loop's ProbeState.
func (l *proberLink) Startup(id string) (started, ok bool) {
	if m := l.get(); m != nil {
		return m.StatusResults().Startup(id)
	}
	return false, false
}

func (l *proberLink) Readiness(id string) (ready, ok bool) {
	if m := l.get(); m != nil {
		return m.StatusResults().Readiness(id)
	}
	return false, false
}

// runtimeProbeView is the runtime's ProbeResults over the link (its
// Startup differs from ProbeState's, so it is a type of its own).
type runtimeProbeView struct{ l *proberLink }

func (v runtimeProbeView) Liveness(id string) kubetypes.ProbeResult {
	if m := v.l.get(); m != nil {
		return m.RuntimeResults().Liveness(id)
	}
	return kubetypes.ProbeUnknown
}

func (v runtimeProbeView) Startup(id string) kubetypes.ProbeResult {
	if m := v.l.get(); m != nil {
		return m.RuntimeResults().Startup(id)
	}
	return kubetypes.ProbeUnknown
}

// run runs the Manager and forwards its updates to the sync loop until ctx
// ends; it returns once both have stopped.
func (l *proberLink) run(ctx context.Context) error {
	m := l.get()
	if m == nil {
		<-ctx.Done()
		return nil
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-m.Updates():
				select {
				case l.updates <- toLoopUpdate(u):
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	err := m.Run(ctx)
	wg.Wait()
	return err
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
