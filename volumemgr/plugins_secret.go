package volumemgr

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// secretPlugin projects a secret's keys as files through the atomic writer,
// onto a tmpfs per PluginsConfig.SecretTmpfs; re-projected on remount.
type secretPlugin struct{ cfg *pluginsConfig }

func (*secretPlugin) Name() string { return PluginNameSecret }

func (*secretPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && vol.Secret != nil }

func (*secretPlugin) RequiresRemount() bool { return true }

func (p *secretPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	if err := checkSetUpArgs(pod, vol, dir); err != nil {
		return err
	}
	src := vol.Secret
	if src == nil {
		return volumeError(p.Name(), vol, fmt.Errorf("%w: not a secret", ErrUnsupportedVolume))
	}
	payload := map[string]FileProjection{}
	if err := p.cfg.addSecret(ctx, pod, keySelection{
		name: src.SecretName, items: src.Items, defMode: src.DefaultMode, optional: isOptional(src.Optional),
	}, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	applyFsGroup(payload, fsGroupOf(pod))
	if err := p.cfg.writeVolume(ctx, pod, dir, p.cfg.secretTmpfs, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

func (p *secretPlugin) TearDown(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return tearDownDir(p.cfg.Mounter, dir)
}

func (*secretPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) {
	return dir, checkDir(dir)
}

func (c *pluginsConfig) addSecret(ctx context.Context, pod *v1.Pod, sel keySelection, into map[string]FileProjection) error {
	name, optional := sel.name, sel.optional
	mode, err := fileMode(sel.defMode, defaultFileMode)
	if err != nil {
		return err
	}
	if err := ValidateSegment(name); err != nil {
		return fmt.Errorf("secret name: %w", err)
	}
	if c.Objects == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("secret %q: %w", name, ErrNoObjectSource)
	}
	s, err := c.Objects.Secret(ctx, pod.Namespace, name)
	if err != nil {
		if optional && errors.Is(err, ErrObjectNotFound) {
			return nil
		}
		return fmt.Errorf("secret %s/%s: %w", pod.Namespace, name, err)
	}
	if s == nil {
		if optional {
			return nil
		}
		return fmt.Errorf("secret %s/%s: %w", pod.Namespace, name, ErrObjectNotFound)
	}
	return keyPayload("secret", sel, mode, nil, s.Data, into)
}
