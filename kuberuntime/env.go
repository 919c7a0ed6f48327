package kuberuntime

import (
	"github.com/nodekit/nodekit/internal/downward"

	"context"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// EnvSourceGetter fetches the ConfigMaps and Secrets that a container's env
// (configMapKeyRef, secretKeyRef, envFrom) refers to. A missing object is
// reported as (nil, nil) or as an error for which apierrors.IsNotFound is
// true; only then does an optional reference get skipped. Without a getter a
// pod that refers to any ConfigMap or Secret fails with a config error (as a
// kubelet without an API client does).
type EnvSourceGetter interface {
	ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// Bounds on what env building and $(VAR) expansion will work on. Kubernetes
// objects are at most ~1.5 MiB, so real specs are far below them.
const (
	maxExpandInput = 1 << 20 // bytes of one string to expand
	maxEnvVars     = 1 << 16 // variables in one container's environment
)

// expandVars replaces $(NAME) references in s the way Kubernetes does for
// command, args and env values:
//   - $(NAME) becomes lookup(NAME) when it is defined, else stays "$(NAME)";
//   - $$ becomes a single $ (so $$(NAME) is the literal "$(NAME)");
//   - a $ before anything else, a $ at the end and an unclosed "$(" are kept;
//   - a $ followed by an invalid UTF-8 byte yields "$" and U+FFFD, as the
//     Kubernetes implementation does.
//
// Names are not validated: "$(a b)" looks up "a b". Inputs longer than
// maxExpandInput are returned unchanged (no expansion).
func expandVars(s string, lookup func(string) (string, bool)) string {
	if len(s) > maxExpandInput || !strings.Contains(s, "$") {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	last := 0 // start of the not yet copied input
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			continue
		}
		out.WriteString(s[last:i])
		next := s[i+1:]
		switch next[0] {
		case '$':
			out.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(next, ')')
			if end < 0 {
				// Unclosed: keep "$(" and go on scanning after the "(".
				out.WriteString("$(")
				i++
				break
			}
			name := next[1:end]
			if v, ok := lookup(name); ok {
				out.WriteString(v)
			} else {
				out.WriteString("$(" + name + ")")
			}
			i += end + 1
		default:
			r, size := utf8.DecodeRuneInString(next)
			out.WriteByte('$')
			out.WriteRune(r)
			i += size
		}
		last = i + 1
	}
	out.WriteString(s[last:])
	return out.String()
}

// envList is an ordered set of environment variables: a name keeps the place
// where it was first defined and takes the value it was last given.
type envList struct {
	names  []string
	values map[string]string
}

func newEnvList() *envList { return &envList{values: map[string]string{}} }

func (l *envList) set(name, value string) error {
	if _, ok := l.values[name]; !ok {
		if len(l.names) >= maxEnvVars {
			return fmt.Errorf("more than %d environment variables", maxEnvVars)
		}
		l.names = append(l.names, name)
	}
	l.values[name] = value
	return nil
}

func (l *envList) lookup(name string) (string, bool) {
	v, ok := l.values[name]
	return v, ok
}

// envSources caches the ConfigMaps and Secrets fetched for one container.
type envSources struct {
	b          *configBuilder
	ctx        context.Context
	ns         string
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

// configMap returns the named ConfigMap, nil when it does not exist.
func (s *envSources) configMap(name string) (*v1.ConfigMap, error) {
	if cm, ok := s.configMaps[name]; ok {
		return cm, nil
	}
	if s.b.envSources == nil {
		return nil, fmt.Errorf("configMap %s/%s: no EnvSourceGetter configured", s.ns, name)
	}
	cm, err := s.b.envSources.ConfigMap(s.ctx, s.ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			cm = nil
		} else {
			return nil, fmt.Errorf("configMap %s/%s: %w", s.ns, name, err)
		}
	}
	s.configMaps[name] = cm
	return cm, nil
}

// secret returns the named Secret, nil when it does not exist.
func (s *envSources) secret(name string) (*v1.Secret, error) {
	if sec, ok := s.secrets[name]; ok {
		return sec, nil
	}
	if s.b.envSources == nil {
		return nil, fmt.Errorf("secret %s/%s: no EnvSourceGetter configured", s.ns, name)
	}
	sec, err := s.b.envSources.Secret(s.ctx, s.ns, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			sec = nil
		} else {
			return nil, fmt.Errorf("secret %s/%s: %w", s.ns, name, err)
		}
	}
	s.secrets[name] = sec
	return sec, nil
}

// usableEnvName rejects names a process environment cannot hold. Kubernetes
// 1.36 accepts any printable name for envFrom keys (the kubelet no longer
// skips "invalid" ones); only an empty name or one with '=' or NUL cannot be
// written as NAME=value, and those keys are skipped.
func usableEnvName(n string) bool {
	return n != "" && !strings.ContainsAny(n, "=\x00")
}

func isOptional(p *bool) bool { return p != nil && *p }

// containerEnv builds a container's environment as the kubelet does:
//  1. envFrom sources in order (ConfigMap data, or Secret data, each key
//     with the source's prefix; keys of one source in sorted order);
//  2. env entries in order: a value is $(VAR)-expanded against everything
//     defined before it; valueFrom is resolved (fieldRef, resourceFieldRef,
//     configMapKeyRef, secretKeyRef).
//
// A later definition of a name replaces the value but keeps the first
// position. No service-link variables are added (nodekit has no Services).
// The returned list is what $(VAR) in command and args expand against.
func (b *configBuilder) containerEnv(ctx context.Context, in containerInput) (*envList, error) {
	pod, c := in.Pod, in.Container
	env := newEnvList()
	src := &envSources{b: b, ctx: ctx, ns: pod.Namespace, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}

	for i, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := src.configMap(ef.ConfigMapRef.Name)
			if err != nil {
				return nil, fmt.Errorf("envFrom[%d]: %w", i, err)
			}
			if cm == nil {
				if isOptional(ef.ConfigMapRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: configMap %s/%s not found", i, pod.Namespace, ef.ConfigMapRef.Name)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			sec, err := src.secret(ef.SecretRef.Name)
			if err != nil {
				return nil, fmt.Errorf("envFrom[%d]: %w", i, err)
			}
			if sec == nil {
				if isOptional(ef.SecretRef.Optional) {
					continue
				}
				return nil, fmt.Errorf("envFrom[%d]: secret %s/%s not found", i, pod.Namespace, ef.SecretRef.Name)
			}
			data = make(map[string]string, len(sec.Data))
			for k, v := range sec.Data {
				data[k] = string(v)
			}
		default:
			continue
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := ef.Prefix + k
			if !usableEnvName(name) {
				continue
			}
			if err := env.set(name, data[k]); err != nil {
				return nil, err
			}
		}
	}

	for i := range c.Env {
		e := &c.Env[i]
		val := e.Value
		switch {
		case val != "":
			val = expandVars(val, env.lookup)
		case e.ValueFrom != nil:
			v, skip, err := b.envValueFrom(in, src, e)
			if err != nil {
				return nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			if skip {
				continue
			}
			val = v
		}
		if err := env.set(e.Name, val); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// envValueFrom resolves one valueFrom; skip is true for a missing optional key.
func (b *configBuilder) envValueFrom(in containerInput, src *envSources, e *v1.EnvVar) (val string, skip bool, err error) {
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		v, err := b.fieldRefValue(in, vf.FieldRef.FieldPath)
		return v, false, err
	case vf.ResourceFieldRef != nil:
		v, err := b.resourceFieldRefValue(in, vf.ResourceFieldRef)
		return v, false, err
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := src.configMap(ref.Name)
		if err != nil {
			return "", false, err
		}
		if cm == nil {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("configMap %s/%s not found", in.Pod.Namespace, ref.Name)
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("key %q not found in configMap %s/%s", ref.Key, in.Pod.Namespace, ref.Name)
		}
		return v, false, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		sec, err := src.secret(ref.Name)
		if err != nil {
			return "", false, err
		}
		if sec == nil {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("secret %s/%s not found", in.Pod.Namespace, ref.Name)
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if isOptional(ref.Optional) {
				return "", true, nil
			}
			return "", false, fmt.Errorf("key %q not found in secret %s/%s", ref.Key, in.Pod.Namespace, ref.Name)
		}
		return string(v), false, nil
	case vf.FileKeyRef != nil:
		// Needs the host path of a mounted volume, which the config builder
		// does not know.
		return "", false, fmt.Errorf("fileKeyRef is not supported")
	}
	return "", false, nil
}

// fieldRefValue resolves a downward-API field path for an env var.
func (b *configBuilder) fieldRefValue(in containerInput, path string) (string, error) {
	pod := in.Pod
	if len(path) > 1024 {
		return "", fmt.Errorf("fieldRef path too long")
	}
	if k, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[k], nil
	}
	if k, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[k], nil
	}
	switch path {
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
	case "spec.nodeName":
		if pod.Spec.NodeName != "" {
			return pod.Spec.NodeName, nil
		}
		return b.cfg.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		ips := b.nodeIPs(pod)
		if len(ips) == 0 {
			return "", fmt.Errorf("%s: the node's IP is not known", path)
		}
		if path == "status.hostIP" {
			return ips[0], nil
		}
		return strings.Join(ips, ","), nil
	case "status.podIP":
		if len(in.PodIPs) > 0 {
			return in.PodIPs[0], nil
		}
		return "", nil
	case "status.podIPs":
		return strings.Join(in.PodIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldRef path %q", path)
}

// nodeIPs: the configured host IPs, else what the pod's status says.
func (b *configBuilder) nodeIPs(pod *v1.Pod) []string {
	if b.hostIPs != nil {
		if ips := b.hostIPs(); len(ips) > 0 {
			return ips
		}
	}
	var ips []string
	for _, ip := range pod.Status.HostIPs {
		if ip.IP != "" {
			ips = append(ips, ip.IP)
		}
	}
	if len(ips) == 0 && pod.Status.HostIP != "" {
		ips = []string{pod.Status.HostIP}
	}
	return ips
}

// subscript matches "<prefix>['key']" and returns key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	k, ok := strings.CutSuffix(rest, "']")
	return k, ok
}

// resourceFieldRefValue resolves a resourceFieldRef (internal/downward)
// against this container or the one it names. A limit the container does
// not set reads as the node's allocatable amount when Config.NodeAllocatable
// is set, else as 0.
func (b *configBuilder) resourceFieldRefValue(in containerInput, ref *v1.ResourceFieldSelector) (string, error) {
	c := in.Container
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		if c = downward.Container(in.Pod, ref.ContainerName); c == nil {
			return "", fmt.Errorf("resourceFieldRef: container %q not found", ref.ContainerName)
		}
	}
	allocatable := b.cfg.NodeAllocatable
	if allocatable == nil {
		allocatable = func() v1.ResourceList { return nil }
	}
	return downward.ResourceValue(c, ref, allocatable)
}
