package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/containermgr/devicemanager"
)

// TestWidgets: the example plugin registers its widgets with a device
// manager, a container gets their env and mounts, and the unhealthy list
// lowers allocatable.
func TestWidgets(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir, err := os.MkdirTemp("", "wp")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	plugins, state := filepath.Join(dir, "p"), filepath.Join(dir, "s")
	m, err := devicemanager.New(devicemanager.Config{PluginDir: plugins})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mDone, pDone := make(chan error, 1), make(chan error, 1)
	go func() { mDone <- m.Run(ctx) }()
	<-m.Ready()
	reread := make(chan os.Signal, 1)
	go func() {
		pDone <- run(ctx, config{PluginDir: plugins, StateDir: state, Resource: "example.com/widget", Count: 3, HealthPeriod: time.Hour, DeviceNode: "/dev/null"}, reread, zap.NewNop())
	}()
	defer func() {
		cancel()
		if err := <-pDone; err != nil {
			t.Errorf("plugin: %v", err)
		}
		if err := <-mDone; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	wait := func(want int64) {
		t.Helper()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		for {
			ch := m.Changed()
			_, a := m.DeviceCapacity()
			if q := a["example.com/widget"]; q.Value() == want {
				return
			}
			select {
			case <-ch:
			case <-deadline.C:
				t.Fatalf("allocatable never %d", want)
			}
		}
	}
	wait(3)
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"example.com/widget": resource.MustParse("2")}}}}}}
	pod.UID, pod.Name = types.UID("u1"), "p"
	if ok, reason, msg := m.Admit(pod, nil); !ok {
		t.Fatalf("rejected: %s %s", reason, msg)
	}
	cfg := &runtimeapi.ContainerConfig{}
	if err := m.ApplyContainerDevices(ctx, pod, &pod.Spec.Containers[0], cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Envs) != 1 || cfg.Envs[0].Key != "WIDGET_IDS" || string(cfg.Envs[0].Value) != "w0,w1" {
		t.Fatalf("envs %v", cfg.Envs)
	}
	if len(cfg.Mounts) != 2 || cfg.Mounts[0].ContainerPath != "/widgets/w0" || cfg.Mounts[0].HostPath != filepath.Join(state, "w0") || !cfg.Mounts[0].Readonly {
		t.Fatalf("mounts %v", cfg.Mounts)
	}
	if len(cfg.Devices) != 2 || cfg.Devices[1].ContainerPath != "/dev/widget-w1" || cfg.Devices[1].HostPath != "/dev/null" {
		t.Fatalf("devices %v", cfg.Devices)
	}
	if b, err := os.ReadFile(cfg.Mounts[1].HostPath); err != nil || string(b) != "widget w1\n" {
		t.Fatalf("host file: %q %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(state, "unhealthy"), []byte("w2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reread <- os.Interrupt
	wait(2)
}
