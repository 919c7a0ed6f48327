package nodekit

import (
	"context"
	"fmt"
	"reflect"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
func (b *Builder) WithDeviceManager(m DeviceManager) *Builder {
	switch v := reflect.ValueOf(m); {
	case m == nil || v.Kind() == reflect.Pointer && v.IsNil():
		return b.fail("WithDeviceManager was given a nil manager")
	case b.deviceMgr != nil:
		return b.fail("WithDeviceManager given twice")
	}
	b.deviceMgr = m
	b.wired = append(b.wired, deviceWiring{m: m}.hooks())
	return b
}

// DeviceManager is what WithDeviceManager wires; containermgr/devicemanager's
// Manager satisfies it. (An interface, so that an agent that never calls
// WithDeviceManager does not link the device plugin API.)
type DeviceManager interface {
	// Start loads the state before the first pod is admitted.
	Start(ctx context.Context, activePods func() []*v1.Pod, sourcesReady func() bool) error
	// Run serves the plugins for the agent's life.
	Run(ctx context.Context) error
	// Admit allocates a pod's devices at admission.
	Admit(pod *v1.Pod, active []*v1.Pod) (ok bool, reason, message string)
	// RemovePod frees a stopped pod's devices.
	RemovePod(podUID string) error
	// ApplyContainerDevices puts a container's devices in its CRI config.
	ApplyContainerDevices(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error
	// DeviceCapacity reports the extended resources for the node status.
	DeviceCapacity() (capacity, allocatable v1.ResourceList)
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
	m DeviceManager
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
