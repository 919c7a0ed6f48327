package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// pinner pins containers by name.
type pinner map[string]string

func (p pinner) ContainerCPUSet(_ *v1.Pod, c *v1.Container) (string, bool) {
	s, ok := p[c.Name]
	return s, ok
}

// TestContainerCPUSet: the CPUSets provider's answer becomes the CRI
// config's CpusetCpus; no answer (or no provider) leaves it empty.
func TestContainerCPUSet(t *testing.T) {
	pod := envPod(v1.Container{Name: "pinned", Image: "busybox"})
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "free", Image: "busybox"})
	for _, tc := range []struct {
		name     string
		provider CPUSetProvider
		want     map[string]string
	}{
		{"no provider", nil, map[string]string{"pinned": "", "free": ""}},
		{"provider", pinner{"pinned": "1,3"}, map[string]string{"pinned": "1,3", "free": ""}},
	} {
		b := &configBuilder{cfg: &Config{CPUSets: tc.provider}}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			cfg, err := b.containerConfig(t.Context(), containerInput{Pod: pod, Container: c, ContainerType: ContainerTypeRegular, ImageRef: "img"})
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.GetLinux().GetResources().GetCpusetCpus(); got != tc.want[c.Name] {
				t.Errorf("%s: container %s cpuset %q, want %q", tc.name, c.Name, got, tc.want[c.Name])
			}
		}
	}
}
