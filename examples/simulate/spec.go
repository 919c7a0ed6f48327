package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// nodeSpec is what one simulated node is: its capacity, labels and taints.
type nodeSpec struct {
	CPU              resource.Quantity
	Memory           resource.Quantity
	EphemeralStorage resource.Quantity
	Pods             int
	Labels           map[string]string
	Taints           []v1.Taint
}

// specFile is the --node-config file (YAML or JSON): entries matched in
// order against each node name (path.Match globs), each later match
// overriding what it sets.
//
//	nodes:
//	- match: "sim-*"
//	  capacity: {cpu: "8", memory: 32Gi, pods: "110", ephemeral-storage: 100Gi}
//	  labels: {topology.kubernetes.io/zone: zone-a}
//	- match: "sim-000[0-4]"
//	  taints: [{key: gpu, value: "true", effect: NoSchedule}]
type specFile struct {
	Nodes []specEntry `json:"nodes"`
}

type specEntry struct {
	Match    string            `json:"match"`
	Capacity map[string]string `json:"capacity,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Taints   []v1.Taint        `json:"taints,omitempty"`
}

// maxSpecFile bounds the --node-config file.
const maxSpecFile = 4 << 20

// readSpecFile reads and checks a --node-config file.
func readSpecFile(name string) (*specFile, error) {
	st, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if st.Size() > maxSpecFile {
		return nil, fmt.Errorf("--node-config %s: %d bytes, more than %d", name, st.Size(), maxSpecFile)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	var f specFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("--node-config %s: %w", name, err)
	}
	for i, e := range f.Nodes {
		if _, err := path.Match(e.Match, ""); err != nil || e.Match == "" {
			return nil, fmt.Errorf("--node-config %s: nodes[%d].match %q is not a glob", name, i, e.Match)
		}
		var probe nodeSpec
		if err := probe.setCapacity(e.Capacity); err != nil {
			return nil, fmt.Errorf("--node-config %s: nodes[%d]: %w", name, i, err)
		}
		if err := checkTaints(e.Taints); err != nil {
			return nil, fmt.Errorf("--node-config %s: nodes[%d]: %w", name, i, err)
		}
	}
	return &f, nil
}

// apply sets what the matching entries say on s.
func (f *specFile) apply(name string, s *nodeSpec) {
	if f == nil {
		return
	}
	for _, e := range f.Nodes {
		if ok, _ := path.Match(e.Match, name); !ok {
			continue
		}
		_ = s.setCapacity(e.Capacity) // checked by readSpecFile
		if len(e.Labels) > 0 {
			labels := make(map[string]string, len(s.Labels)+len(e.Labels))
			for k, v := range s.Labels {
				labels[k] = v
			}
			for k, v := range e.Labels {
				labels[k] = v
			}
			s.Labels = labels
		}
		if e.Taints != nil {
			s.Taints = e.Taints
		}
	}
}

// setCapacity reads cpu, memory, ephemeral-storage and pods.
func (s *nodeSpec) setCapacity(c map[string]string) error {
	for k, v := range c {
		if len(v) > 64 {
			return fmt.Errorf("capacity %s: value longer than 64 bytes", k)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("capacity %s=%q: %w", k, v, err)
		}
		if q.Sign() <= 0 {
			return fmt.Errorf("capacity %s=%q: must be positive", k, v)
		}
		switch k {
		case "cpu":
			s.CPU = q
		case "memory":
			s.Memory = q
		case "ephemeral-storage":
			s.EphemeralStorage = q
		case "pods":
			if !q.IsZero() && (q.Value() > 1<<20 || q.MilliValue()%1000 != 0) {
				return fmt.Errorf("capacity pods=%q: a whole number up to %d", v, 1<<20)
			}
			s.Pods = int(q.Value())
		default:
			return fmt.Errorf("capacity %q: want cpu, memory, ephemeral-storage or pods", k)
		}
	}
	return nil
}

// parseLabels reads k=v,k=v.
func parseLabels(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels %q: %q is not key=value", s, kv)
		}
		out[k] = v
	}
	return out, nil
}

// parseTaints reads key[=value]:Effect,...
func parseTaints(s string) ([]v1.Taint, error) {
	if s == "" {
		return nil, nil
	}
	var out []v1.Taint
	for _, t := range strings.Split(s, ",") {
		kv, effect, ok := strings.Cut(t, ":")
		if !ok {
			return nil, fmt.Errorf("--taints %q: %q is not key[=value]:Effect", s, t)
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, v1.Taint{Key: k, Value: v, Effect: v1.TaintEffect(effect)})
	}
	if err := checkTaints(out); err != nil {
		return nil, fmt.Errorf("--taints %q: %w", s, err)
	}
	return out, nil
}

func checkTaints(ts []v1.Taint) error {
	var errs []error
	for _, t := range ts {
		switch {
		case t.Key == "":
			errs = append(errs, errors.New("a taint without a key"))
		case t.Effect != v1.TaintEffectNoSchedule && t.Effect != v1.TaintEffectPreferNoSchedule && t.Effect != v1.TaintEffectNoExecute:
			errs = append(errs, fmt.Errorf("taint %s: effect %q, want NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
		}
	}
	return errors.Join(errs...)
}

// nodeNames expands the --name-pattern: one fmt verb taking the index.
func nodeNames(pattern string, n, first int) ([]string, error) {
	if strings.Count(pattern, "%") != 1 || !strings.ContainsAny(pattern[strings.Index(pattern, "%"):], "dxX") {
		return nil, fmt.Errorf("--name-pattern %q: want one integer verb, e.g. sim-%%04d", pattern)
	}
	seen := map[string]bool{}
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf(pattern, first+i)
		if strings.Contains(name, "%!") || !validNodeName(name) {
			return nil, fmt.Errorf("--name-pattern %q: %q is not a valid node name", pattern, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("--name-pattern %q: %q twice", pattern, name)
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

// validNodeName: a DNS subdomain (lower case alphanumerics, '-' and '.').
func validNodeName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '.') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}
