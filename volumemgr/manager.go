package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults (the kubelet's).
const (
	DefaultReconcilePeriod = 100 * time.Millisecond
	DefaultPopulatePeriod  = 100 * time.Millisecond
	// DefaultWaitTimeout bounds WaitForAttachAndMount and WaitForUnmount.
	DefaultWaitTimeout = 2*time.Minute + 3*time.Second
	// DefaultWaitPollPeriod is how often a waiter looks again when nothing
	// told it of a change.
	DefaultWaitPollPeriod = 300 * time.Millisecond
)

// Config configures a Manager. PodsDir is required; the rest is optional.
type Config struct {
	// PodsDir is the kubelet's <root>/pods: volumes live in
	// PodsDir/<uid>/volumes/<escaped plugin>/<volume>, subPath mounts in
	// PodsDir/<uid>/volume-subpaths/<volume>/<container>/<index>.
	PodsDir string
	// Plugins serve the volumes (default DefaultPlugins with Mounter,
	// Clock and Logger from this Config).
	Plugins []Plugin
	// Pods, PodState and SourcesReady are the pod source. They may be
	// left nil here and set with SetPodSource before Run (the sync loop
	// that provides them is built after the Manager). PodState nil: no pod
	// is terminating and a pod's runtime may be removed once Pods no
	// longer lists it. SourcesReady nil: always ready.
	Pods         PodLister
	PodState     PodStateProvider
	SourcesReady func() bool
	// Mounter undoes mounts the manager did not make in this process:
	// subPath bind mounts left from before a restart, and mounted dirs of
	// volumes no plugin knows. Nil: such mounts are left alone (their
	// dirs are then not removed). Use &SystemMounter{} in a real agent.
	Mounter Mounter
	// PrepareSubPath binds a subPath into place (default: a missing subPath
	// is made as a dir beneath the volume, as the kubelet does, then
	// PrepareSubPath); tests substitute a stub.
	PrepareSubPath func(volumeDir, subPath, target string) (hostPath string, cleanup func() error, err error)

	Clock      clock.WithTicker      // default clock.RealClock{}
	Logger     *zap.Logger           // default zap.NewNop(), named "volumemgr"
	Registerer prometheus.Registerer // nil: no metrics

	ReconcilePeriod time.Duration // default 100ms
	PopulatePeriod  time.Duration // default 100ms
	WaitTimeout     time.Duration // default 2m3s
	WaitPollPeriod  time.Duration // default 300ms
}

// MountedVolume is a volume set up for a pod.
type MountedVolume struct {
	// Name is the pod's volume name.
	Name string
	// UniqueName is <plugin name>/<pod UID>-<volume name>.
	UniqueName string
	PluginName string
	// Dir is the volume's dir under PodsDir.
	Dir string
	// HostPath is what is bound into containers (Dir, or the host path of
	// a hostPath volume).
	HostPath string
	// Volume is the pod's volume spec (shared: read-only).
	Volume *v1.Volume
}

// podSource is the bound pod source.
type podSource struct {
	pods  PodLister
	state PodStateProvider
	ready func() bool
}

func (s *podSource) sourcesReady() bool { return s.ready == nil || s.ready() }

func (s *podSource) terminating(uid types.UID) bool {
	return s.state != nil && s.state.ShouldPodContainersBeTerminating(uid)
}

func (s *podSource) runtimeRemoved(uid types.UID, listed map[types.UID]*v1.Pod) bool {
	if s.state != nil {
		return s.state.ShouldPodRuntimeBeRemoved(uid)
	}
	_, ok := listed[uid]
	return !ok
}

// Manager is the volume manager: it keeps the volumes of the pods the
// agent runs set up, and torn down once their pods are gone. It satisfies
// kuberuntime.MountProvider (ContainerMounts) and the sync loop's VolumeHooks
// (WaitForAttachAndMount, WaitForUnmount).
type Manager struct {
	cfg     Config
	plugins []Plugin
	clock   clock.WithTicker
	log     *zap.Logger
	metrics *metrics
	src     atomic.Pointer[podSource]

	dsw *desiredState
	asw *actualState
	pop *populator
	rec *reconciler

	changeMu sync.Mutex
	changed  chan struct{} // closed and replaced on every state change

	once lifecycle.Once
}

// New validates cfg and fills in defaults. It does no I/O and starts
// nothing.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.PodsDir == "" {
		errs = append(errs, fmt.Errorf("%w: PodsDir is required", ErrInvalidConfig))
	} else if !filepath.IsAbs(cfg.PodsDir) {
		errs = append(errs, fmt.Errorf("%w: PodsDir %q must be absolute", ErrInvalidConfig, cfg.PodsDir))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ReconcilePeriod", &cfg.ReconcilePeriod, DefaultReconcilePeriod},
		{"PopulatePeriod", &cfg.PopulatePeriod, DefaultPopulatePeriod},
		{"WaitTimeout", &cfg.WaitTimeout, DefaultWaitTimeout},
		{"WaitPollPeriod", &cfg.WaitPollPeriod, DefaultWaitPollPeriod},
	} {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%w: %s must not be negative, got %v", ErrInvalidConfig, d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	for i, p := range cfg.Plugins {
		if p == nil {
			errs = append(errs, fmt.Errorf("%w: Plugins[%d] is nil", ErrInvalidConfig, i))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.PrepareSubPath == nil {
		cfg.PrepareSubPath = makeAndPrepareSubPath
	}
	cfg.PodsDir = filepath.Clean(cfg.PodsDir)
	m := &Manager{
		cfg:     cfg,
		plugins: cfg.Plugins,
		clock:   cfg.Clock,
		log:     cfg.Logger.Named("volumemgr"),
		dsw:     newDesiredState(),
		asw:     newActualState(),
		changed: make(chan struct{}),
	}
	if m.plugins == nil {
		m.plugins = DefaultPlugins(PluginsConfig{Mounter: cfg.Mounter, Clock: cfg.Clock, Logger: cfg.Logger})
	}
	if cfg.Registerer != nil {
		mt, err := newMetrics(cfg.Registerer)
		if err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
		m.metrics = mt
	}
	m.pop = newPopulator(m)
	m.rec = newReconciler(m)
	if cfg.Pods != nil {
		m.SetPodSource(cfg.Pods, cfg.PodState, cfg.SourcesReady)
	}
	return m, nil
}

// SetPodSource binds the pods whose volumes are managed, for a caller that
// builds the Manager before the sync loop that lists the pods (as with the
// nodekit Builder: the Manager is handed to WithVolumes, the loop exists
// after Build). state and sourcesReady may be nil (see Config). Call it
// before Run; calling it again replaces the source.
func (m *Manager) SetPodSource(pods PodLister, state PodStateProvider, sourcesReady func() bool) {
	if pods == nil {
		m.src.Store(nil)
		return
	}
	m.src.Store(&podSource{pods: pods, state: state, ready: sourcesReady})
}

func (m *Manager) source() *podSource { return m.src.Load() }

// Plugins returns the plugins in use.
func (m *Manager) Plugins() []Plugin { return slices.Clone(m.plugins) }

// Run reconstructs the actual state from disk, then runs the populator and
// the reconciler, each every period, until ctx ends; it returns nil then,
// after both have stopped. Without a pod source it returns ErrNoPodSource.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if m.source() == nil {
		return ErrNoPodSource
	}
	if err := m.once.Start(); err != nil {
		return err
	}

	if err := m.Reconstruct(ctx); err != nil && ctx.Err() == nil {
		// Not fatal: volumes of gone pods may stay until a restart.
		m.log.Error("volume reconstruction failed", zap.Error(err))
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		m.every(ctx, m.cfg.PopulatePeriod, m.PopulateOnce)
	}()
	go func() {
		defer wg.Done()
		m.every(ctx, m.cfg.ReconcilePeriod, m.ReconcileOnce)
	}()
	wg.Wait()
	return nil
}

// every calls step now and then every period until ctx ends.
func (m *Manager) every(ctx context.Context, period time.Duration, step func(context.Context)) {
	t := m.clock.NewTicker(period)
	defer t.Stop()
	for {
		step(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// notify wakes the waiters: the state changed.
func (m *Manager) notify() {
	m.changeMu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.changeMu.Unlock()
}

func (m *Manager) changes() <-chan struct{} {
	m.changeMu.Lock()
	defer m.changeMu.Unlock()
	return m.changed
}

// WaitForAttachAndMount returns once every volume some container of the
// pod mounts is set up (nil at once when there is none). It first asks the
// populator to process the pod again, so that configMap, secret, projected
// and downwardAPI volumes are projected again. An error recorded for the
// pod (a volume without a plugin or with an unsafe name, a SetUp failure)
// ends the wait at once. On failure the error reads, as the kubelet's,
// "unmounted volumes=[a b], unattached volumes=[], failed to process
// volumes=[c]: <cause>" (lists sorted), the cause being the recorded
// errors, ErrTimeout after WaitTimeout, or ctx's error.
func (m *Manager) WaitForAttachAndMount(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	expected := expectedVolumes(pod)
	if len(expected) == 0 {
		return nil
	}
	m.ReprocessPod(pod.UID)
	cause := m.wait(ctx, pod.UID, func() bool { return len(m.unmountedVolumes(pod.UID, expected)) == 0 })
	if cause == nil {
		return nil
	}
	unmounted := m.unmountedVolumes(pod.UID, expected)
	if len(unmounted) == 0 {
		return nil
	}
	notInDSW := m.volumesNotDesired(pod.UID, expected)
	return fmt.Errorf("unmounted volumes=%v, unattached volumes=%v, failed to process volumes=%v: %w",
		unmounted, []string{}, notInDSW, cause)
}

// WaitForUnmount returns once nothing of the pod is set up any more (its
// volumes leave the desired state once PodStateProvider says its runtime
// may be removed). On failure the error reads "mounted volumes=[<unique
// names>]: <cause>".
func (m *Manager) WaitForUnmount(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return nil
	}
	m.ReprocessPod(pod.UID)
	cause := m.wait(ctx, pod.UID, func() bool { return !m.asw.podHasVolumes(pod.UID) })
	if cause == nil {
		return nil
	}
	mounted := m.asw.podVolumeUniqueNames(pod.UID)
	if len(mounted) == 0 {
		return nil
	}
	return fmt.Errorf("mounted volumes=%v: %w", mounted, cause)
}

// wait polls done (on every state change and every WaitPollPeriod) until
// it is true (nil), errors are recorded for the pod (returned joined),
// WaitTimeout passes (ErrTimeout) or ctx ends (its error).
func (m *Manager) wait(ctx context.Context, uid types.UID, done func() bool) error {
	var timer clock.Timer
	var ticker clock.Ticker
	defer func() {
		if timer != nil {
			timer.Stop()
			ticker.Stop()
		}
	}()
	for {
		changed := m.changes()
		if errs := m.dsw.popErrors(uid); len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		if done() {
			return nil
		}
		if timer == nil {
			timer = m.clock.NewTimer(m.cfg.WaitTimeout)
			ticker = m.clock.NewTicker(m.cfg.WaitPollPeriod)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C():
			return ErrTimeout
		case <-changed:
		case <-ticker.C():
		}
	}
}

// unmountedVolumes returns the expected volumes that are not desired or
// not mounted for sure, sorted.
func (m *Manager) unmountedVolumes(uid types.UID, expected []string) []string {
	var out []string
	for _, name := range expected {
		if !m.dsw.volumeExists(uid, name) || !m.asw.isMounted(uid, name) {
			out = append(out, name)
		}
	}
	return out
}

// volumesNotDesired returns the expected volumes that are not in the
// desired state (they failed processing), sorted.
func (m *Manager) volumesNotDesired(uid types.UID, expected []string) []string {
	names := m.dsw.volumeNames(uid)
	out := []string{}
	for _, name := range expected {
		if _, ok := names[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

// expectedVolumes returns the sorted names of the volumes the pod's
// containers mount or use as devices.
func expectedVolumes(pod *v1.Pod) []string {
	used := usedVolumeNames(pod)
	out := make([]string, 0, len(used))
	for n := range used {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// GetMountedVolumesForPod returns the pod's volumes that are set up (not
// the uncertain ones), by volume name.
func (m *Manager) GetMountedVolumesForPod(uid types.UID) map[string]MountedVolume {
	return m.asw.mountedForPod(uid)
}

// GetVolumesInUse returns the unique names of the volumes desired or set
// up, sorted and without duplicates. (The kubelet lists only attachable
// volumes here, and none of nodekit's plugins is attachable; nodekit lists
// every volume so that a caller sees what the node holds.)
func (m *Manager) GetVolumesInUse() []string {
	set := map[string]struct{}{}
	m.dsw.mu.RLock()
	for _, dp := range m.dsw.pods {
		for _, v := range dp.volumes {
			set[v.uniqueName] = struct{}{}
		}
	}
	m.dsw.mu.RUnlock()
	m.asw.uniqueNames(set)
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ContainerMounts returns the CRI mounts of the container's volumeMounts,
// in order: the volume's host path (for a subPath, a bind mount of the
// path resolved beneath the volume by PrepareSubPath at
// PodsDir/<uid>/volume-subpaths/<volume>/<container>/<index>, undone when
// the volume is torn down), read-only when the mount asks for it and
// always for configMap, secret, projected and downwardAPI volumes,
// propagation private unless HostToContainer or Bidirectional, no SELinux
// relabelling. Every volume must be mounted (ErrVolumeNotMounted) and
// exist in the pod (ErrVolumeNotFound). subPathExpr is expanded with the
// container's literal env values ($(NAME)); other references stay as
// written.
func (m *Manager) ContainerMounts(ctx context.Context, pod *v1.Pod, container *v1.Container) ([]*runtimeapi.Mount, error) {
	if pod == nil || container == nil || len(container.VolumeMounts) == 0 {
		return nil, nil
	}
	out := make([]*runtimeapi.Mount, 0, len(container.VolumeMounts))
	for i := range container.VolumeMounts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vm := &container.VolumeMounts[i]
		if !podHasVolume(pod, vm.Name) {
			return nil, fmt.Errorf("%w: container %q mounts %q", ErrVolumeNotFound, container.Name, vm.Name)
		}
		mv, ok := m.asw.mountedForPod(pod.UID)[vm.Name]
		if !ok {
			return nil, fmt.Errorf("%w: volume %q of pod %s/%s", ErrVolumeNotMounted, vm.Name, pod.Namespace, pod.Name)
		}
		hostPath := mv.HostPath
		subPath := vm.SubPath
		if vm.SubPathExpr != "" {
			subPath = expandEnv(vm.SubPathExpr, container.Env)
		}
		if subPath != "" {
			hp, err := m.bindSubPath(pod, container, i, mv, subPath)
			if err != nil {
				return nil, err
			}
			hostPath = hp
		}
		prop, err := propagation(vm.MountPropagation)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, container.Name, err)
		}
		readOnly := vm.ReadOnly || readOnlyPlugin(mv.PluginName)
		mount := &runtimeapi.Mount{
			ContainerPath:  vm.MountPath,
			HostPath:       hostPath,
			Readonly:       readOnly,
			Propagation:    prop,
			SelinuxRelabel: false,
		}
		if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
			if !readOnly {
				return nil, fmt.Errorf("%w: volumeMount %q of container %q: recursiveReadOnly Enabled needs readOnly",
					ErrUnsupportedVolume, vm.Name, container.Name)
			}
			mount.RecursiveReadOnly = true
		}
		out = append(out, mount)
	}
	return out, nil
}

// bindSubPath prepares the subPath mount of the container's index-th
// volumeMount and records its cleanup with the volume.
func (m *Manager) bindSubPath(pod *v1.Pod, c *v1.Container, index int, mv MountedVolume, subPath string) (string, error) {
	wrap := func(err error) error {
		return fmt.Errorf("subPath %q of volumeMount %q of container %q: %w", subPath, mv.Name, c.Name, err)
	}
	if err := ValidateSubPath(subPath); err != nil {
		return "", wrap(err)
	}
	if err := ValidateSegment(string(pod.UID)); err != nil {
		return "", wrap(err)
	}
	target, err := SubPathTarget(filepath.Join(m.cfg.PodsDir, string(pod.UID)), mv.Name, c.Name, index)
	if err != nil {
		return "", wrap(err)
	}
	// A container started again gets a fresh bind: undo the previous one
	// (made by this process, or left from before a restart).
	if prev := m.asw.takeSubPath(pod.UID, mv.Name, target); prev != nil {
		if err := prev(); err != nil {
			return "", wrap(err)
		}
	} else if m.cfg.Mounter != nil {
		if err := unmountIfMounted(m.cfg.Mounter, target); err != nil {
			return "", wrap(err)
		}
	}
	hostPath, cleanup, err := m.cfg.PrepareSubPath(mv.HostPath, subPath, target)
	if err != nil {
		return "", wrap(err)
	}
	if cleanup == nil {
		cleanup = func() error { return nil }
	}
	if _, ok := m.asw.addSubPath(pod.UID, mv.Name, target, cleanup); !ok {
		err := fmt.Errorf("%w: volume %q was torn down", ErrVolumeNotMounted, mv.Name)
		return "", wrap(errors.Join(err, cleanup()))
	}
	return hostPath, nil
}

func podHasVolume(pod *v1.Pod, name string) bool {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return true
		}
	}
	return false
}

// readOnlyPlugin: the kubelet always mounts these read-only.
func readOnlyPlugin(name string) bool {
	switch name {
	case PluginNameConfigMap, PluginNameSecret, PluginNameProjected, PluginNameDownwardAPI:
		return true
	}
	return false
}

func propagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	if mode == nil {
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	}
	switch *mode {
	case v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("%w: mount propagation %q", ErrUnsupportedVolume, *mode)
}

// expandEnv replaces $(NAME) with the value of the container's env var
// NAME (literal values only; a reference to an unknown or non-literal
// variable stays as written, as in the kubelet), and $$ with $.
func expandEnv(s string, env []v1.EnvVar) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			found := false
			for _, e := range env {
				if e.Name == name && e.ValueFrom == nil {
					b.WriteString(e.Value)
					found = true
					break
				}
			}
			if !found {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// metrics are the manager's Prometheus collectors.
type metrics struct {
	volumes *prometheus.GaugeVec           // volume_manager_total_volumes{plugin_name,state}
	ops     *prometheus.CounterVec         // nodekit_volumemgr_operations_total{operation,result}
	known   map[string]map[string]struct{} // state -> plugin names set before
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	mt := &metrics{
		volumes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "volume_manager_total_volumes",
			Help: "Number of volumes in the volume manager, by plugin and state (desired_state_of_world, actual_state_of_world).",
		}, []string{"plugin_name", "state"}),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nodekit_volumemgr_operations_total",
			Help: "Volume set ups (mount) and tear downs (unmount) by result.",
		}, []string{"operation", "result"}),
		known: map[string]map[string]struct{}{},
	}
	for _, c := range []prometheus.Collector{mt.volumes, mt.ops} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return mt, nil
}

// setCounts sets the gauges of state from counts (plugins seen before and
// now absent go to 0).
func (mt *metrics) setCounts(state string, counts map[string]int) {
	known := mt.known[state]
	if known == nil {
		known = map[string]struct{}{}
		mt.known[state] = known
	}
	for name := range known {
		if _, ok := counts[name]; !ok {
			mt.volumes.WithLabelValues(name, state).Set(0)
		}
	}
	for name, n := range counts {
		known[name] = struct{}{}
		mt.volumes.WithLabelValues(name, state).Set(float64(n))
	}
}

func (mt *metrics) observeOp(op string, err error) {
	if mt == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	mt.ops.WithLabelValues(op, result).Inc()
}

// makeAndPrepareSubPath creates subPath beneath volumeDir when it does not
// exist (mkdirat relative to descriptors resolved with OpenSubPath, so no
// symlink can lead the creation out of the volume), then PrepareSubPath.
func makeAndPrepareSubPath(volumeDir, subPath, target string) (string, func() error, error) {
	if err := makeSubPathDirs(volumeDir, subPath); err != nil {
		return "", nil, err
	}
	return PrepareSubPath(volumeDir, subPath, target)
}

func makeSubPathDirs(volumeDir, subPath string) error {
	if err := ValidateSubPath(subPath); err != nil {
		return err
	}
	fd, err := OpenSubPath(volumeDir, subPath)
	if err == nil {
		return unix.Close(fd)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	segs := strings.Split(subPath, "/")
	for i := range segs {
		if segs[i] == "" {
			continue
		}
		var parent int
		if i == 0 {
			parent, err = unix.Open(volumeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		} else {
			parent, err = OpenSubPath(volumeDir, strings.Join(segs[:i], "/"))
		}
		if err != nil {
			return fmt.Errorf("subPath %q: %w", subPath, err)
		}
		err = unix.Mkdirat(parent, segs[i], 0o750)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("subPath %q: make %s: %w", subPath, strings.Join(segs[:i+1], "/"), err)
		}
	}
	return nil
}
