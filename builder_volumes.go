package nodekit

import (
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volumemgr"
)

// WithVolumeManager wires a volume manager into the agent in one call: the
// sync loop waits on it before containers start and after they stop, the
// runtime takes the containers' mounts from it, it learns the agent's pods
// and their states once the agent is built, and it runs (reconstructing
// what an earlier run left on disk) for the agent's life.
func (b *Builder) WithVolumeManager(m *volumemgr.Manager) *Builder {
	switch {
	case m == nil:
		return b.fail("WithVolumeManager was given a nil manager")
	case b.volumeMgr != nil:
		return b.fail("WithVolumeManager given twice")
	}
	b.volumeMgr = m
	w := volumeWiring{m: m}
	b.wired = append(b.wired, wiring{rank: rankVolumes, engine: w.engine, loop: w.loop, connect: w.connect})
	return b
}

type volumeWiring struct {
	m *volumemgr.Manager
}

func (w volumeWiring) engine(_ *build, cfg *kuberuntime.Config) { cfg.Mounts = w.m }
func (w volumeWiring) loop(_ *build, cfg *syncloop.Config)      { cfg.Volumes = w.m }

func (w volumeWiring) connect(bd *build) {
	a := bd.a
	w.m.SetPodSource(a.loop, a.loop.PodWorkers(), a.podConfig.SeenAllSources)
	a.parts = append(a.parts, extraPart{name: "volumemgr", run: w.m.Run})
}
