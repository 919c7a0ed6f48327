package nodekit

import (
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
		b.misuse = append(b.misuse, configErr("builder", "WithVolumeManager was given a nil manager"))
	case b.volumeMgr != nil:
		b.misuse = append(b.misuse, configErr("builder", "WithVolumeManager given twice"))
	default:
		b.volumeMgr = m
	}
	return b
}
