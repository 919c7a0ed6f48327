package volumemgr

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
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

// formatMap renders a map as sorted `key="value"` lines (Go quoting).
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceFieldValue renders a container's limit or request divided by the
// divisor (rounded up). Limits a container does not set are the node's
// allocatable, as the kubelet reports them.
func (c *pluginsConfig) resourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	var ctr *v1.Container
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == ref.ContainerName {
				ctr = &list[i]
			}
		}
	}
	if ctr == nil {
		return "", fmt.Errorf("%w: container %q not found in pod", ErrUnsupportedVolume, ref.ContainerName)
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("%w: resource %q", ErrUnsupportedVolume, ref.Resource)
	}
	name := v1.ResourceName(res)
	switch {
	case name == v1.ResourceCPU, name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage,
		strings.HasPrefix(res, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("%w: resource %q", ErrUnsupportedVolume, ref.Resource)
	}
	var q resource.Quantity
	if kind == "limits" {
		if v, ok := ctr.Resources.Limits[name]; ok && !v.IsZero() {
			q = v
		} else if name == v1.ResourceCPU || name == v1.ResourceMemory || name == v1.ResourceEphemeralStorage {
			if c.NodeAllocatable == nil {
				return "", fmt.Errorf("%w: container %q has no %s limit and node allocatable is unknown", ErrUnsupportedVolume, ctr.Name, res)
			}
			q = c.NodeAllocatable()[name]
		}
	} else {
		q = ctr.Resources.Requests[name]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == v1.ResourceCPU {
		return ceilDiv(q.MilliValue(), divisor.MilliValue()), nil
	}
	return ceilDiv(q.Value(), divisor.Value()), nil
}

// ceilDiv renders ceil(a/b) for a ≥ 0, b > 0 (b ≤ 0 counts as 1).
func ceilDiv(a, b int64) string {
	if b <= 0 {
		b = 1
	}
	if a <= 0 {
		return "0"
	}
	return strconv.FormatInt(a/b+min(a%b, 1), 10)
}
