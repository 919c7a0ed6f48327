package nodekit

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/containermgr/devicemanager"
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// WithDeviceManager wires a device manager in one call: it loads its
// checkpoint before the first pod is admitted, serves the device plugin
// registration socket for the agent's life, admission allocates each
// pod's devices (a pod that can't get them is rejected with
// UnexpectedAdmissionError), containers are created with their devices
// (envs, mounts, device nodes, annotations, CDI names), devices come back
// when a pod has stopped, and the node status reports the plugins'
// resources (Agent.DeviceCapacity; clusterapiserver.Wire uses it). Give
// the manager the agent's <root>/device-plugins as its PluginDir
// (devicemanager.PluginDirName), as the kubelet has it under its root.
func (b *Builder) WithDeviceManager(m *devicemanager.Manager) *Builder {
	return record(b, &b.deviceMgr, m, "WithDeviceManager", deviceWiring{m: m}.hooks())
}

// DeviceCapacity reports the device plugins' extended resources
// (capacity: all devices, allocatable: healthy ones; nodestatus's
// DeviceCapacity). Both are nil without WithDeviceManager.
func (a *Agent) DeviceCapacity() (capacity, allocatable v1.ResourceList) {
	if a.devices == nil {
		return nil, nil
	}
	return a.devices()
}

type deviceWiring struct {
	m *devicemanager.Manager
}

func (w deviceWiring) hooks() wiring {
	return wiring{rank: rankDevices, engine: w.engine, loop: w.loop, connect: w.connect}
}

func (w deviceWiring) engine(_ *build, cfg *kuberuntime.Config) { cfg.Devices = w.m }

func (w deviceWiring) loop(_ *build, cfg *syncloop.Config) {
	m := w.m
	cfg.Admitters = append(cfg.Admitters, admitWith(m.Admit))
	cfg.PodTerminated = append(cfg.PodTerminated, func(_ context.Context, pod *v1.Pod) error { return m.RemovePod(string(pod.UID)) })
}

func (w deviceWiring) connect(bd *build) {
	a, m := bd.a, w.m
	a.devices = m.DeviceCapacity
	a.starters = append(a.starters, func(ctx context.Context) error {
		if err := m.Start(ctx, a.ActivePods, a.sourcesReady); err != nil {
			return fmt.Errorf("nodekit: starting the device manager: %w", err)
		}
		return nil
	})
	a.parts = append(a.parts, extraPart{name: "devicemanager", run: m.Run})
}
