package volumemgr

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// defaultTokenExpiration is the API default of a projected token's
// expirationSeconds.
const defaultTokenExpiration = 3600

// projectedPlugin merges configMap, secret, downwardAPI and
// serviceAccountToken sources into one volume (tmpfs per
// PluginsConfig.SecretTmpfs); re-projected on remount.
type projectedPlugin struct{ cfg *pluginsConfig }

func (*projectedPlugin) Name() string { return PluginNameProjected }

func (*projectedPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && vol.Projected != nil }

func (*projectedPlugin) RequiresRemount() bool { return true }

func (p *projectedPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	if err := checkSetUpArgs(pod, vol, dir); err != nil {
		return err
	}
	if vol.Projected == nil {
		return volumeError(p.Name(), vol, fmt.Errorf("%w: not a projected volume", ErrUnsupportedVolume))
	}
	payload, err := p.cfg.projectedPayload(ctx, pod, vol.Projected)
	if err != nil {
		return volumeError(p.Name(), vol, err)
	}
	if err := p.cfg.writeVolume(ctx, pod, dir, p.cfg.secretTmpfs, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

func (c *pluginsConfig) projectedPayload(ctx context.Context, pod *v1.Pod, src *v1.ProjectedVolumeSource) (map[string]FileProjection, error) {
	def := src.DefaultMode
	if def == nil {
		m := int32(defaultFileMode)
		def = &m
	}
	payload := map[string]FileProjection{}
	fsGroup := fsGroupOf(pod)
	for i, s := range src.Sources {
		part := map[string]FileProjection{}
		var err error
		switch {
		case s.ConfigMap != nil:
			err = c.addConfigMap(ctx, pod, keySelection{
				name: s.ConfigMap.Name, items: s.ConfigMap.Items, defMode: def, optional: isOptional(s.ConfigMap.Optional),
			}, part)
			applyFsGroup(part, fsGroup)
		case s.Secret != nil:
			err = c.addSecret(ctx, pod, keySelection{
				name: s.Secret.Name, items: s.Secret.Items, defMode: def, optional: isOptional(s.Secret.Optional),
			}, part)
			applyFsGroup(part, fsGroup)
		case s.DownwardAPI != nil:
			err = c.addDownwardAPI(pod, s.DownwardAPI.Items, def, part)
			applyFsGroup(part, fsGroup)
		case s.ServiceAccountToken != nil:
			err = c.addToken(ctx, pod, s.ServiceAccountToken, def, part)
		default:
			err = fmt.Errorf("%w: source %d has no supported projection (configMap, secret, downwardAPI, serviceAccountToken)", ErrUnsupportedVolume, i)
		}
		if err != nil {
			return nil, fmt.Errorf("source %d: %w", i, err)
		}
		for k, v := range part {
			payload[k] = v // a later source wins, as in the kubelet
		}
	}
	return payload, nil
}

// addToken requests a token for the pod's service account. With a pod
// RunAsUser and fsGroup it is owned by that user and 0600 (the kubelet's
// rule for projected tokens); otherwise defMode.
func (c *pluginsConfig) addToken(ctx context.Context, pod *v1.Pod, src *v1.ServiceAccountTokenProjection, defMode *int32, into map[string]FileProjection) error {
	if err := ValidateItemPath(src.Path); err != nil {
		return err
	}
	if c.Tokens == nil {
		return fmt.Errorf("serviceAccountToken %q: %w", src.Path, ErrNoTokenSource)
	}
	mode, err := fileMode(defMode, defaultFileMode)
	if err != nil {
		return err
	}
	exp := int64(defaultTokenExpiration)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	tok, err := c.Tokens.ServiceAccountToken(ctx, pod, src.Audience, exp)
	if err != nil {
		return fmt.Errorf("serviceAccountToken %q: %w", src.Path, err)
	}
	fp := FileProjection{Data: []byte(tok), Mode: mode}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil && sc.FSGroup != nil {
		fp.FsUser = sc.RunAsUser
		fp.Mode = 0o600
	}
	into[src.Path] = fp
	return nil
}

func (p *projectedPlugin) TearDown(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return tearDownDir(p.cfg.Mounter, dir)
}

func (*projectedPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) {
	return dir, checkDir(dir)
}
