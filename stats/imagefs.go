package stats

import (
	"context"

	"go.uber.org/zap"
)

// runtimeapiFsUsage is one file system the runtime reports.
type runtimeapiFsUsage struct {
	mountpoint   string
	used, inodes *uint64
}

// imageFsInfo asks the runtime's ImageFsInfo, when it has one: the image
// file system and, when the runtime reports it apart (containerd 2.x), the
// container file system.
func (p *Provider) imageFsInfo(ctx context.Context) (images, containers *runtimeapiFsUsage) {
	i, ok := p.cfg.Runtime.(ImageFsInfoer)
	if !ok {
		return nil, nil
	}
	resp, err := i.ImageFsInfo(ctx)
	if err != nil {
		p.log.Debug("CRI ImageFsInfo failed", zap.Error(err))
		return nil, nil
	}
	conv := func(mount string, used, inodes interface{ GetValue() uint64 }, hasUsed, hasInodes bool) *runtimeapiFsUsage {
		u := &runtimeapiFsUsage{mountpoint: mount}
		if hasUsed {
			u.used = u64(used.GetValue())
		}
		if hasInodes {
			u.inodes = u64(inodes.GetValue())
		}
		return u
	}
	if fs := resp.GetImageFilesystems(); len(fs) > 0 && fs[0] != nil {
		f := fs[0]
		images = conv(f.GetFsId().GetMountpoint(), f.GetUsedBytes(), f.GetInodesUsed(), f.GetUsedBytes() != nil, f.GetInodesUsed() != nil)
	}
	if fs := resp.GetContainerFilesystems(); len(fs) > 0 && fs[0] != nil {
		f := fs[0]
		containers = conv(f.GetFsId().GetMountpoint(), f.GetUsedBytes(), f.GetInodesUsed(), f.GetUsedBytes() != nil, f.GetInodesUsed() != nil)
	}
	return images, containers
}
