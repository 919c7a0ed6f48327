package volumemgr

import (
	"github.com/nodekit/nodekit/internal/downward"

	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// downwardAPIPlugin projects pod metadata and container resources as files
// (tmpfs per PluginsConfig.SecretTmpfs, as the kubelet's wrapped
// memory-backed emptyDir); re-projected on remount so label and annotation
// changes show up.
type downwardAPIPlugin struct{ cfg *pluginsConfig }

func (*downwardAPIPlugin) Name() string { return PluginNameDownwardAPI }

func (*downwardAPIPlugin) CanSupport(vol *v1.Volume) bool {
	return vol != nil && vol.DownwardAPI != nil
}

func (*downwardAPIPlugin) RequiresRemount() bool { return true }

func (p *downwardAPIPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	if err := checkSetUpArgs(pod, vol, dir); err != nil {
		return err
	}
	src := vol.DownwardAPI
	if src == nil {
		return volumeError(p.Name(), vol, fmt.Errorf("%w: not a downwardAPI volume", ErrUnsupportedVolume))
	}
	payload := map[string]FileProjection{}
	if err := p.cfg.addDownwardAPI(pod, src.Items, src.DefaultMode, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	applyFsGroup(payload, fsGroupOf(pod))
	if err := p.cfg.writeVolume(ctx, pod, dir, p.cfg.secretTmpfs, payload); err != nil {
		return volumeError(p.Name(), vol, err)
	}
	return nil
}

func (p *downwardAPIPlugin) TearDown(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return tearDownDir(p.cfg.Mounter, dir)
}

func (*downwardAPIPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) {
	return dir, checkDir(dir)
}

func (c *pluginsConfig) addDownwardAPI(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, defMode *int32, into map[string]FileProjection) error {
	def, err := fileMode(defMode, defaultFileMode)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := ValidateItemPath(it.Path); err != nil {
			return err
		}
		mode, err := fileMode(it.Mode, def)
		if err != nil {
			return fmt.Errorf("item %q: %w", it.Path, err)
		}
		var val string
		switch {
		case it.FieldRef != nil:
			val, err = podFieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			val, err = c.resourceFieldValue(pod, it.ResourceFieldRef)
		default:
			err = fmt.Errorf("%w: item %q has neither fieldRef nor resourceFieldRef", ErrUnsupportedVolume, it.Path)
		}
		if err != nil {
			return fmt.Errorf("item %q: %w", it.Path, err)
		}
		into[it.Path] = FileProjection{Data: []byte(val), Mode: mode}
	}
	return nil
}

// podFieldValue supports the fields a downwardAPI volume may reference.
func podFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if m, key, ok := subscript(fieldPath); ok {
		switch m {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return downward.FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return downward.FormatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("%w: fieldPath %q", ErrUnsupportedVolume, truncForError(fieldPath))
}

// subscript splits `metadata.labels['key']`.
func subscript(fp string) (string, string, bool) {
	open := strings.Index(fp, "['")
	if open < 0 || !strings.HasSuffix(fp, "']") || open+2 > len(fp)-2 {
		return "", "", false
	}
	return fp[:open], fp[open+2 : len(fp)-2], true
}

// resourceFieldValue resolves a resourceFieldRef (internal/downward). Limits
// a container does not set are the node's allocatable, as the kubelet
// reports them; an error when that is unknown.
func (c *pluginsConfig) resourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	ctr := downward.Container(pod, ref.ContainerName)
	if ctr == nil {
		return "", fmt.Errorf("%w: container %q not found in pod", ErrUnsupportedVolume, ref.ContainerName)
	}
	v, err := downward.ResourceValue(ctr, ref, c.NodeAllocatable)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnsupportedVolume, err)
	}
	return v, nil
}
