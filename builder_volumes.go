package nodekit

import (
	"context"

	"github.com/nodekit/nodekit/volumemgr"
)

// WithVolumeManager wires a volume manager into the agent in one call: the
// sync loop waits on it before containers start and after they stop, the
// runtime takes the containers' mounts from it, it learns the agent's pods
// and their states once the agent is built, and it runs (reconstructing
// what an earlier run left on disk) for the agent's life.
func (b *Builder) WithVolumeManager(m *volumemgr.Manager) *Builder {
	if m == nil {
		b.afterBuild = append(b.afterBuild, func(*Agent) error {
			return configErr("builder", "WithVolumeManager was given a nil manager")
		})
		return b
	}
	b.WithVolumes(m, m)
	b.afterBuild = append(b.afterBuild, func(a *Agent) error {
		m.SetPodSource(a.loop, a.loop.PodWorkers(), a.podConfig.SeenAllSources)
		return nil
	})
	return b.WithPart("volumemgr", func(ctx context.Context) error { return m.Run(ctx) })
}
