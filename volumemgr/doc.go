// Package volumemgr is nodekit's volume manager: it keeps the volumes of
// the pods a node agent runs set up under the pods dir, hands them to the
// runtime as CRI mounts, and tears them down once the pods' containers are
// gone, as the kubelet's volumemanager does. The plugins (emptyDir,
// hostPath, configMap, secret, projected, downwardAPI) are in the same
// package; any Plugin can be added.
//
// # Wiring
//
// The Manager needs the agent's pods and the pod workers' view of them,
// which exist only once the agent is built; it is therefore made first,
// handed to the Builder, and bound to the sync loop after Build:
//
//	mgr, err := volumemgr.New(volumemgr.Config{
//		PodsDir: filepath.Join(root, "pods"),
//		Plugins: volumemgr.DefaultPlugins(volumemgr.PluginsConfig{
//			Objects: &volumemgr.DirObjectSource{Dir: "/etc/nodekit/objects"},
//			Mounter: &volumemgr.SystemMounter{},
//		}),
//		Mounter: &volumemgr.SystemMounter{},
//	})
//	agent, err := nodekit.NewBuilder().
//		WithRootDir(root).
//		WithVolumes(mgr, mgr).            // VolumeHooks and kuberuntime.MountProvider
//		WithPart("volumemgr", mgr.Run).
//		Build()
//	mgr.SetPodSource(agent.Loop(), agent.Loop().PodWorkers(), agent.PodConfig().SeenAllSources)
//	err = agent.Run(ctx)
//
// syncloop's *Loop is the PodLister and its *PodWorkers the
// PodStateProvider; the package does not import syncloop.
//
// # Desired and actual state
//
// The desired state holds, per pod, the volumes some container (init,
// regular or ephemeral) mounts or uses as a device, each with its plugin,
// its dir PodsDir/<uid>/volumes/<escaped plugin name>/<volume> and its
// unique name <plugin name>/<pod UID>-<volume> (no plugin here is
// attachable, so no volume is shared between pods). Pod UIDs and volume
// names must be single safe path segments (ValidateSegment) before any of
// them becomes a path. The actual state holds what is set up, per pod; a
// volume found on disk after a restart is "uncertain" and counts as not
// mounted until it is set up again.
//
// # Populator and reconciler
//
// PopulateOnce (every PopulatePeriod, 100ms, under Run) adds the pods the
// PodLister gives; once a pass that began with SourcesReady has ended
// (HasAddedPods), terminating pods are no longer added, and before it pods
// whose runtime is already gone are not. A pod leaves the desired state
// only when PodStateProvider.ShouldPodRuntimeBeRemoved says so. A volume
// without a plugin, or with an unsafe name, is recorded as an error of the
// pod. ReprocessPod (called by WaitForAttachAndMount, i.e. on every sync of
// the pod) has the next pass process the pod again, which marks its
// configMap, secret, projected and downwardAPI volumes for a remount: the
// content follows the objects on the pod's resync.
//
// ReconcileOnce (every ReconcilePeriod, 100ms) tears down what is set up
// but not desired (only once HasAddedPods, so that a volume is never
// unmounted because its pod has not been listed yet; subPath bind mounts
// first), sets up what is desired and not mounted, uncertain or marked for
// a remount, and, once HasAddedPods, cleans the dirs of volumes no
// configured plugin knows and no pod wants. A failing SetUp or TearDown is
// retried with back-off (500ms doubling to 2m2s). A first SetUp failure is
// an error of the pod; a failing remount keeps the old content, as in the
// kubelet.
//
// # Waiting
//
// WaitForAttachAndMount returns nil at once for a pod without mounted
// volumes, an error of the pod at once, and otherwise waits (woken by every
// state change, and every 300ms) until every expected volume is set up, or
// WaitTimeout (2m3s) passes. Its error reads as the kubelet's:
//
//	unmounted volumes=[a b], unattached volumes=[], failed to process volumes=[b]: timed out waiting for the condition
//
// WaitForUnmount waits until nothing of the pod is set up ("mounted
// volumes=[<unique names>]: ..." on failure).
//
// # Restart
//
// Run first calls Reconstruct: every PodsDir/<uid>/volumes/<plugin>/<vol>
// goes into the actual state as uncertain. A pod still wanted gets its
// volume set up again (SetUp is idempotent and keeps the content); the
// volumes of pods that are gone are torn down and their dirs removed once
// HasAddedPods. Symlinks on disk are never followed and names that are not
// safe segments are skipped.
//
// # Container mounts
//
// ContainerMounts (kuberuntime.MountProvider) maps each volumeMount to a CRI
// mount: the plugin's host path, or for a subPath (or subPathExpr) the
// path resolved beneath the volume with openat2 RESOLVE_BENEATH and
// bind-mounted at PodsDir/<uid>/volume-subpaths/<volume>/<container>/<index>
// (PrepareSubPath), undone when the volume is torn down; read-only when
// asked and always for configMap, secret, projected and downwardAPI;
// propagation private unless HostToContainer or Bidirectional; no SELinux
// relabel.
//
// # Metrics
//
// With Config.Registerer: volume_manager_total_volumes{plugin_name,state}
// and nodekit_volumemgr_operations_total{operation,result}.
package volumemgr
