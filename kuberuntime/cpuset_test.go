package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// deviceAdder adds one device node and env to containers it knows, and
// fails for the container named "broken".
type deviceAdder struct{}

func (deviceAdder) ApplyContainerDevices(_ context.Context, _ *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	if c.Name == "broken" {
		return errors.New("plugin gone")
	}
	cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: "/dev/w0", HostPath: "/dev/null", Permissions: "rw"})
	cfg.Envs = append([]*runtimeapi.KeyValue{{Key: "W", Value: []byte("w0")}}, cfg.Envs...)
	return nil
}

// TestContainerDevices: the Devices provider sees the finished config and
// its additions reach the CRI config; its error is a config error.
func TestContainerDevices(t *testing.T) {
	pod := envPod(v1.Container{Name: "dev", Image: "busybox", Env: []v1.EnvVar{{Name: "A", Value: "1"}}})
	b := &configBuilder{cfg: &Config{Devices: deviceAdder{}}}
	cfg, err := b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.Containers[0], ContainerType: ContainerTypeRegular, ImageRef: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].ContainerPath != "/dev/w0" || len(cfg.Envs) < 2 || cfg.Envs[0].Key != "W" {
		t.Fatalf("devices %v envs %v", cfg.Devices, cfg.Envs)
	}
	pod.Spec.Containers[0].Name = "broken"
	_, err = b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.Containers[0], ContainerType: ContainerTypeRegular, ImageRef: "img"})
	if err == nil || !strings.Contains(err.Error(), "plugin gone") {
		t.Fatalf("provider error = %v", err)
	}
}
