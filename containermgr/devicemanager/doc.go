// Package devicemanager is the kubelet's device manager: device plugins
// (the k8s.io/kubelet deviceplugin v1beta1 API) advertise extended
// resources such as example.com/widget, and the manager allocates their
// devices to containers.
//
// Registration. Run serves the Registration service on
// <PluginDir>/kubelet.sock (the kubelet's /var/lib/kubelet/device-plugins;
// SocketPath). A registration with a version other than v1beta1, a
// resource name that is not an extended resource (domain/name outside
// kubernetes.io) or an endpoint that is not one file name in PluginDir is
// refused with an error saying so. The plugin is then dialled on
// <PluginDir>/<endpoint>, asked for its options and followed through its
// ListAndWatch stream: one endpoint per resource name, a new registration
// replacing the old. With Config.RegistryDir set, plugins that register
// through the plugin watcher (pluginregistration v1: a socket in
// plugins_registry/, GetInfo, NotifyRegistrationStatus) are taken too.
//
// Capacity. DeviceCapacity gives the node status (nodestatus
// MachineInfoConfig.Devices) capacity = all devices of a resource and
// allocatable = its healthy ones. A plugin that disconnects has all its
// devices marked unhealthy (allocatable 0) and keeps them in capacity for
// GracePeriod (the kubelet's 5 minutes); then the resource is forgotten
// and reported as 0 until it registers again (a pod asking for it is then
// refused as OutOf<resource>, as the kubelet's resource fit does against
// the Node's 0). A plugin that restarts and
// registers again is followed anew.
//
// Allocation. Admit allocates every container's devices at admission
// (init containers first; an app container reuses the devices of the
// pod's finished init containers; a restartable init container keeps its
// own): healthy devices not held by another container, the plugin's
// GetPreferredAllocation choice first when it offers one, else the devices
// of the one NUMA node that fits the request most tightly, else by ID;
// then Allocate.
// A pod that cannot get them is rejected with the kubelet's reason
// UnexpectedAdmissionError and message "Allocate failed due to requested
// number of devices unavailable for example.com/widget. Requested: 2,
// Available: 1, which is unexpected" and holds nothing. Requests for
// resources no plugin registered are ignored, as the kubelet does.
// ApplyContainerDevices (kuberuntime.Config.Devices) puts the plugin's
// Allocate response into the container's CRI config: envs before the
// container's own (which win), mounts before the volumes', device nodes,
// annotations (the agent's keys win) and CDI device names; PreStartContainer
// is called first when the plugin asked for it. RemovePod (when a pod has
// stopped) frees its devices; Reconcile (Run, every minute) frees those of
// pods that have gone from the agent's active pods.
//
// Topology. TopologyHints gives, per device resource a container asks
// for, the NUMA node sets (containermgr/topology.Hint) its request can be
// met from, preferred when narrowest, as the kubelet's device manager
// gives its topology manager; nil for devices without NUMA affinity.
//
// State. Every allocation (pod UID, container, resource, device IDs, the
// plugin's response) and every resource's device IDs are written to
// kubelet_internal_checkpoint in StateDir (internal/checkpoint: atomic,
// CRC-checked) before the call that made them returns. Start reads it back:
// containers keep their devices (re-admitted with them, even before their
// plugin registers again), nothing is allocated twice, and the resources
// are known with their devices unhealthy until the plugins return. A
// corrupt or inconsistent checkpoint is set aside as
// kubelet_internal_checkpoint.corrupt (logged as an error) and the manager
// starts with no allocations: the devices a pod held are not known any
// more (the runtime cannot say which were used), so a running container's
// devices may be given again.
//
// Wiring (the Builder's WithDeviceManager does all of this):
//
//	mgr, err := devicemanager.New(devicemanager.Config{
//		PluginDir:   filepath.Join(root, devicemanager.PluginDirName),   // <root>/device-plugins
//		RegistryDir: filepath.Join(root, devicemanager.RegistryDirName), // optional: <root>/plugins_registry
//	})
//	err = mgr.Start(ctx, agent.ActivePods, sourcesReady)
//	go mgr.Run(ctx)
//	// admission: mgr.Admit; kuberuntime.Config.Devices = mgr;
//	// pod terminated: mgr.RemovePod; node status: MachineInfoConfig.Devices = mgr
package devicemanager
