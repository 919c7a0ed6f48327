package volumemgr

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// emptyDirPlugin: a directory on disk (0777), or with medium Memory a tmpfs
// sized min(node allocatable, pod memory limit, sizeLimit).
type emptyDirPlugin struct{ cfg *pluginsConfig }

func (*emptyDirPlugin) Name() string { return PluginNameEmptyDir }

func (*emptyDirPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && vol.EmptyDir != nil }

func (*emptyDirPlugin) RequiresRemount() bool { return false }

func (p *emptyDirPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	if err := checkSetUpArgs(pod, vol, dir); err != nil {
		return err
	}
	if vol.EmptyDir == nil {
		return volumeError(p.Name(), vol, fmt.Errorf("%w: not an emptyDir", ErrUnsupportedVolume))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if sl := vol.EmptyDir.SizeLimit; sl != nil && sl.Sign() < 0 {
		// Not "no limit": a negative size is a mistake, refused before
		// anything is created or mounted.
		return volumeError(p.Name(), vol, fmt.Errorf("%w: sizeLimit %s is negative", ErrInvalidVolume, sl.String()))
	}
	var err error
	switch vol.EmptyDir.Medium {
	case v1.StorageMediumDefault:
		_, err = setUpDir(p.cfg.Mounter, dir, false, 0)
	case v1.StorageMediumMemory:
		if p.cfg.Mounter == nil {
			return volumeError(p.Name(), vol, fmt.Errorf("medium Memory: %w", ErrNoMounter))
		}
		_, err = setUpDir(p.cfg.Mounter, dir, true, p.cfg.memoryVolumeSize(pod, vol.EmptyDir.SizeLimit))
	default:
		err = fmt.Errorf("%w: medium %q", ErrUnsupportedVolume, vol.EmptyDir.Medium)
	}
	if err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

func (p *emptyDirPlugin) TearDown(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return tearDownDir(p.cfg.Mounter, dir)
}

func (*emptyDirPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) {
	return dir, checkDir(dir)
}
