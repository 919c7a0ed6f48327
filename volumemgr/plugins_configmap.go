package volumemgr

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// configMapPlugin projects a configMap's keys as files (on disk, as the
// kubelet does) through the atomic writer; re-projected on remount.
type configMapPlugin struct{ cfg *pluginsConfig }

func (*configMapPlugin) Name() string { return PluginNameConfigMap }

func (*configMapPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && vol.ConfigMap != nil }

func (*configMapPlugin) RequiresRemount() bool { return true }

func (p *configMapPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	if err := checkSetUpArgs(pod, vol, dir); err != nil {
		return err
	}
	src := vol.ConfigMap
	if src == nil {
		return volumeError(p.Name(), vol, fmt.Errorf("%w: not a configMap", ErrUnsupportedVolume))
	}
	payload := map[string]FileProjection{}
	if err := p.cfg.addConfigMap(ctx, pod, keySelection{
		name: src.Name, items: src.Items, defMode: src.DefaultMode, optional: isOptional(src.Optional),
	}, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	applyFsGroup(payload, fsGroupOf(pod))
	if err := p.cfg.writeVolume(ctx, pod, dir, false, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

func (p *configMapPlugin) TearDown(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return tearDownDir(p.cfg.Mounter, dir)
}

func (*configMapPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) {
	return dir, checkDir(dir)
}

// addConfigMap fetches a configMap and projects it into into. A missing
// object (or no ObjectSource) adds nothing when optional.
func (c *pluginsConfig) addConfigMap(ctx context.Context, pod *v1.Pod, sel keySelection, into map[string]FileProjection) error {
	name, optional := sel.name, sel.optional
	mode, err := fileMode(sel.defMode, defaultFileMode)
	if err != nil {
		return err
	}
	if err := ValidateSegment(name); err != nil {
		return fmt.Errorf("configMap name: %w", err)
	}
	if c.Objects == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("configMap %q: %w", name, ErrNoObjectSource)
	}
	cm, err := c.Objects.ConfigMap(ctx, pod.Namespace, name)
	if err != nil {
		if optional && errors.Is(err, ErrObjectNotFound) {
			return nil
		}
		return fmt.Errorf("configMap %s/%s: %w", pod.Namespace, name, err)
	}
	if cm == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("configMap %s/%s: %w", pod.Namespace, name, ErrObjectNotFound)
	}
	return keyPayload("configMap", sel, mode, cm.Data, cm.BinaryData, into)
}
