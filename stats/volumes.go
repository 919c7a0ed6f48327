package stats

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// emptyDirDir is where a pod's emptyDir volumes are, under
// <PodsDir>/<uid>/volumes: the plugin name "kubernetes.io/empty-dir"
// escaped as the kubelet escapes it.
const emptyDirDir = "kubernetes.io~empty-dir"

// volumeCache keeps each pod's measured emptyDir volumes for
// VolumeStatsPeriod, as the kubelet's volume stats calculator does; a pod
// no full Summary saw is dropped at its end.
type volumeCache struct {
	mu   sync.Mutex
	pods map[string]volumeEntry
}

type volumeEntry struct {
	at   time.Time
	seen uint64
	vols []volumeUsage
}

type volumeUsage struct {
	name string
	u    fsutil.Usage
}

// podVolumes measures the pod's emptyDir volumes (those on the file
// system of their parent: a medium Memory volume, a tmpfs, is not node
// disk), or replays the last measurement younger than VolumeStatsPeriod.
func (p *Provider) podVolumes(ctx context.Context, gen uint64, now time.Time, uid string) ([]volumeUsage, time.Time) {
	if p.cfg.PodsDir == "" || uid == "" || uid == "." || uid == ".." || strings.ContainsAny(uid, "/\\\x00") {
		return nil, now
	}
	p.vols.mu.Lock()
	e, ok := p.vols.pods[uid]
	if ok && now.Sub(e.at) < p.cfg.VolumeStatsPeriod && !now.Before(e.at) {
		e.seen = gen
		p.vols.pods[uid] = e
		p.vols.mu.Unlock()
		return e.vols, e.at
	}
	p.vols.mu.Unlock()
	dir := filepath.Join(p.cfg.PodsDir, uid, "volumes", emptyDirDir)
	var vols []volumeUsage
	_, truncated, err := fsutil.DiskUsage(ctx, dir, func(name string, isDir bool, u fsutil.Usage) {
		if isDir {
			vols = append(vols, volumeUsage{name, u})
		}
	})
	switch {
	case err == nil:
		if truncated {
			p.log.Debug("emptyDir volume too deep, measured in part", zap.String("dir", dir))
		}
	case errors.Is(err, fs.ErrNotExist):
		vols = nil
	default:
		if ctx.Err() == nil {
			p.log.Warn("emptyDir volumes not measured", zap.String("dir", dir), zap.Error(err))
		}
		return nil, now
	}
	slices.SortFunc(vols, func(a, b volumeUsage) int { return strings.Compare(a.name, b.name) })
	p.vols.mu.Lock()
	if p.vols.pods == nil {
		p.vols.pods = map[string]volumeEntry{}
	}
	p.vols.pods[uid] = volumeEntry{at: now, seen: gen, vols: vols}
	p.vols.mu.Unlock()
	return vols, now
}

// endVolumes drops the pods the full Summary of generation gen did not see.
func (p *Provider) endVolumes(gen uint64) {
	p.vols.mu.Lock()
	defer p.vols.mu.Unlock()
	for uid, e := range p.vols.pods {
		if e.seen < gen {
			delete(p.vols.pods, uid)
		}
	}
}
