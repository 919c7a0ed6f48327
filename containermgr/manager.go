package containermgr

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of Config.
const (
	DefaultCgroupRoot        = "/sys/fs/cgroup"
	DefaultPodsCgroup        = "kubepods"
	DefaultProcRoot          = "/proc"
	DefaultCPUCFSQuotaPeriod = 100 * time.Millisecond
	DefaultQOSUpdatePeriod   = time.Minute
	// EnforcePods is the EnforceNodeAllocatable key that puts the
	// allocatable limit on the pods cgroup; EnforceNone turns it off.
	EnforcePods = "pods"
	EnforceNone = "none"
)

// Config configures a Manager.
type Config struct {
	// CgroupRoot is where the cgroup file system is mounted (default
	// /sys/fs/cgroup). A plain directory works when CgroupVersion is set: it
	// is then an emulated hierarchy (control files are created), for tests.
	CgroupRoot string
	// CgroupVersion forces V1 or V2; "" detects it at Start (hybrid is
	// used as V1).
	CgroupVersion Version
	// CgroupDriver: DriverCgroupfs (default) or DriverSystemd.
	CgroupDriver Driver
	// PodsCgroup is the top-level cgroup holding all pods (default
	// "kubepods"); one name part.
	PodsCgroup string
	// DisableCgroupsPerQOS turns off the QoS tree and pod cgroups (the
	// kubelet's --cgroups-per-qos=false): the hooks do nothing and
	// PodCgroupParent is "".
	DisableCgroupsPerQOS bool
	// SystemReserved and KubeReserved are held back from pods.
	SystemReserved v1.ResourceList
	KubeReserved   v1.ResourceList
	// HardEvictionThresholds are also held back from allocatable (not from
	// the enforced pods limit).
	HardEvictionThresholds []EvictionThreshold
	// EnforceNodeAllocatable: nil means {"pods"}; {"none"} turns it off.
	// Only "pods" and "none" are supported.
	EnforceNodeAllocatable []string
	// PodPidsLimit is set on every pod cgroup when positive.
	PodPidsLimit int64
	// DisableCPUCFSQuota leaves cpu limits unenforced (--cpu-cfs-quota=false).
	DisableCPUCFSQuota bool
	// CPUCFSQuotaPeriod, in [1ms, 1s]; default 100ms.
	CPUCFSQuotaPeriod time.Duration
	// Capacity overrides the machine capacity; nil reads it on first use
	// (cpu count, MemTotal of <ProcRoot>/meminfo).
	Capacity v1.ResourceList
	// ProcRoot default /proc.
	ProcRoot string
	// QOSUpdatePeriod is how often Run updates the QoS cgroups and retries
	// the allocatable limit (default 1m).
	QOSUpdatePeriod time.Duration
	// ActivePods, when set, gives the pods Run uses for the QoS update;
	// default: the pods whose cgroup was ensured and not destroyed.
	ActivePods func() []*v1.Pod
	// KillProcess kills a process left in a pod cgroup that is being
	// removed; default SIGKILL.
	KillProcess func(pid int) error
	// Recorder records, on the node (NodeName), NodeAllocatableEnforced
	// when the allocatable limit is set on the pods cgroup and
	// FailedNodeAllocatableEnforcement for each failed try. Nil records
	// none (cmwire.ContainerManager gives the agent's recorder
	// to a manager without one: UseEventRecorder).
	Recorder   kubetypes.EventRecorder
	NodeName   string
	Clock      clock.WithTicker
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// Manager is the container manager: QoS cgroup tree, pod cgroups and node
// allocatable. It implements the sync loop's cgroup hooks (EnsurePodCgroup,
// DestroyPodCgroup) and the runtime's cgroup parent provider
// (PodCgroupParent).
type Manager struct {
	once    lifecycle.Once
	cfg     Config
	log     *zap.Logger
	clock   clock.WithTicker
	enforce bool
	podOpts PodResourceOptions
	pods    CgroupName // the top-level cgroup
	ops     *prometheus.CounterVec

	mu          sync.Mutex
	started     bool
	cgm         *CgroupManager
	capacity    v1.ResourceList
	active      map[types.UID]*v1.Pod
	allocIsSet  bool
	allocErrLog bool
}

// New validates cfg and fills defaults. It does no I/O.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if !filepath.IsAbs(cfg.CgroupRoot) {
		errs = append(errs, fmt.Errorf("%w: CgroupRoot %q is not absolute", ErrInvalidConfig, cfg.CgroupRoot))
	}
	if cfg.CgroupVersion != "" && cfg.CgroupVersion != V1 && cfg.CgroupVersion != V2 {
		errs = append(errs, fmt.Errorf("%w: CgroupVersion %q (want v1, v2 or empty)", ErrInvalidConfig, cfg.CgroupVersion))
	}
	if cfg.CgroupDriver == "" {
		cfg.CgroupDriver = DriverCgroupfs
	}
	if cfg.CgroupDriver != DriverCgroupfs && cfg.CgroupDriver != DriverSystemd {
		errs = append(errs, fmt.Errorf("%w: CgroupDriver %q (want cgroupfs or systemd)", ErrInvalidConfig, cfg.CgroupDriver))
	}
	if cfg.PodsCgroup == "" {
		cfg.PodsCgroup = DefaultPodsCgroup
	}
	pods, err := NewCgroupName(nil, cfg.PodsCgroup)
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: PodsCgroup: %w", ErrInvalidConfig, err))
	}
	enforce := true
	if cfg.EnforceNodeAllocatable != nil {
		enforce = false
		for _, k := range cfg.EnforceNodeAllocatable {
			switch k {
			case EnforcePods:
				enforce = true
			case EnforceNone:
			default:
				errs = append(errs, fmt.Errorf("%w: EnforceNodeAllocatable %q (supported: pods, none)", ErrInvalidConfig, k))
			}
		}
	}
	for _, t := range cfg.HardEvictionThresholds {
		if err := validateThreshold(t); err != nil {
			errs = append(errs, fmt.Errorf("%w: HardEvictionThresholds: %w", ErrInvalidConfig, err))
		}
	}
	for field, rl := range map[string]v1.ResourceList{"SystemReserved": cfg.SystemReserved, "KubeReserved": cfg.KubeReserved, "Capacity": cfg.Capacity} {
		for name, q := range rl {
			if q.Sign() < 0 {
				errs = append(errs, fmt.Errorf("%w: %s[%s] is negative", ErrInvalidConfig, field, name))
			}
		}
	}
	if cfg.PodPidsLimit < -1 {
		errs = append(errs, fmt.Errorf("%w: PodPidsLimit %d", ErrInvalidConfig, cfg.PodPidsLimit))
	}
	if cfg.CPUCFSQuotaPeriod == 0 {
		cfg.CPUCFSQuotaPeriod = DefaultCPUCFSQuotaPeriod
	}
	if cfg.CPUCFSQuotaPeriod < time.Millisecond || cfg.CPUCFSQuotaPeriod > time.Second {
		errs = append(errs, fmt.Errorf("%w: CPUCFSQuotaPeriod %v outside [1ms, 1s]", ErrInvalidConfig, cfg.CPUCFSQuotaPeriod))
	}
	if cfg.QOSUpdatePeriod == 0 {
		cfg.QOSUpdatePeriod = DefaultQOSUpdatePeriod
	}
	if cfg.QOSUpdatePeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: QOSUpdatePeriod %v is negative", ErrInvalidConfig, cfg.QOSUpdatePeriod))
	}
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = DefaultProcRoot
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.KillProcess == nil {
		cfg.KillProcess = func(pid int) error { return unix.Kill(pid, unix.SIGKILL) }
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Logger.Named("containermgr"),
		clock:   cfg.Clock,
		enforce: enforce,
		podOpts: PodResourceOptions{
			DisableCPUQuota: cfg.DisableCPUCFSQuota,
			CPUPeriod:       uint64(cfg.CPUCFSQuotaPeriod / time.Microsecond),
			PidsLimit:       cfg.PodPidsLimit,
		},
		pods:   pods,
		active: map[types.UID]*v1.Pod{},
	}
	if cfg.Capacity != nil {
		m.capacity = cfg.Capacity.DeepCopy()
	}
	if cfg.Registerer != nil {
		m.ops = prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nodekit", Subsystem: "containermgr", Name: "cgroup_operations_total",
			Help: "Pod and QoS cgroup operations by operation and result.",
		}, []string{"operation", "result"})
		if err := cfg.Registerer.Register(m.ops); err != nil {
			return nil, fmt.Errorf("%w: Registerer: %w", ErrInvalidConfig, err)
		}
	}
	return m, nil
}

func (m *Manager) count(op string, err error) {
	if m.ops == nil {
		return
	}
	res := "success"
	if err != nil {
		res = "error"
	}
	m.ops.WithLabelValues(op, res).Inc()
}

// PodsCgroupName is the top-level pods cgroup (Guaranteed pods live in it).
func (m *Manager) PodsCgroupName() CgroupName { return append(CgroupName(nil), m.pods...) }

// MemoryCgroupPaths returns where the memory controller's cgroups are:
// root, the cgroup file system root (on v1 the directory holding the
// memory hierarchy, on v2 the unified hierarchy), and pods, the pods
// cgroup relative to a hierarchy root. Memory threshold notifiers and
// cgroup stats read there. It fails with ErrNotStarted before Start.
func (m *Manager) MemoryCgroupPaths() (root, pods string, err error) {
	cgm := m.CgroupManager()
	if cgm == nil {
		return "", "", ErrNotStarted
	}
	name := m.PodsCgroupName()
	pods = strings.Trim(cgm.Name(name), "/")
	root = strings.TrimSuffix(filepath.Clean(cgm.Path("memory", name)), "/"+pods)
	if cgm.Version() != V2 {
		root = filepath.Dir(root) // <root>/memory
	}
	return root, pods, nil
}

// QOSCgroupName is the cgroup holding the pods of a QoS class.
func (m *Manager) QOSCgroupName(class v1.PodQOSClass) CgroupName {
	switch class {
	case v1.PodQOSBurstable:
		return CgroupName{m.pods[0], "burstable"}
	case v1.PodQOSBestEffort:
		return CgroupName{m.pods[0], "besteffort"}
	}
	return m.PodsCgroupName()
}

// PodCgroupName is the pod's cgroup: pod<uid> under its QoS class cgroup.
func (m *Manager) PodCgroupName(pod *v1.Pod) (CgroupName, error) {
	if pod == nil || pod.UID == "" {
		return nil, fmt.Errorf("%w: pod without a UID", ErrInvalidCgroupName)
	}
	return NewCgroupName(m.QOSCgroupName(QOSClass(pod)), "pod"+string(pod.UID))
}

// PodCgroupParent names the pod's cgroup in the driver's syntax, for the
// runtime (the sandbox's cgroup parent): /kubepods/burstable/pod<uid> with
// cgroupfs. "" (the runtime's default) when cgroups per QoS are off or the
// UID can't be a cgroup name.
func (m *Manager) PodCgroupParent(pod *v1.Pod) string {
	if m.cfg.DisableCgroupsPerQOS {
		return ""
	}
	n, err := m.PodCgroupName(pod)
	if err != nil {
		return ""
	}
	return n.Spell(m.CgroupDriver())
}

// CgroupDriver is the driver in use: the configured one, or the one
// SetCgroupDriver chose before Start.
func (m *Manager) CgroupDriver() Driver {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.CgroupDriver
}

// SetCgroupDriver replaces the configured cgroup driver before Start: the
// kubelet uses the driver its container runtime reports (CRI RuntimeConfig)
// rather than its own setting, and so does the Builder. It fails with
// ErrInvalidConfig for an unknown driver and ErrStarted once the cgroups are
// made (the pods cgroup is named with the driver).
func (m *Manager) SetCgroupDriver(d Driver) error {
	if d != DriverCgroupfs && d != DriverSystemd {
		return fmt.Errorf("%w: CgroupDriver %q (want cgroupfs or systemd)", ErrInvalidConfig, d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.cgm != nil {
		if d == m.cfg.CgroupDriver {
			return nil
		}
		return fmt.Errorf("%w: cannot change the cgroup driver from %s to %s", ErrStarted, m.cfg.CgroupDriver, d)
	}
	m.cfg.CgroupDriver = d
	return nil
}

// CgroupManager is the cgroup manager in use; nil before Start.
func (m *Manager) CgroupManager() *CgroupManager {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cgm
}

// Capacity is the machine capacity (read on first use unless configured);
// nil when it can't be read.
func (m *Manager) Capacity() v1.ResourceList {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.capacityLocked()
	if err != nil {
		m.log.Warn("machine capacity not read", zap.Error(err))
		return nil
	}
	return c.DeepCopy()
}

func (m *Manager) capacityLocked() (v1.ResourceList, error) {
	if m.capacity != nil {
		return m.capacity, nil
	}
	c, err := MachineCapacity(m.cfg.ProcRoot)
	if err != nil {
		return nil, err
	}
	m.capacity = c
	return c, nil
}

// Reservation is system-reserved + kube-reserved + hard eviction
// thresholds, per resource of the capacity.
func (m *Manager) Reservation() v1.ResourceList {
	c := m.Capacity()
	if c == nil {
		return nil
	}
	return Reservation(c, m.cfg.SystemReserved, m.cfg.KubeReserved, m.cfg.HardEvictionThresholds)
}

// NodeAllocatable is what pods may use, as node status reports it:
// capacity minus the reservation (never negative; hugepages taken from
// memory). nil when the capacity can't be read.
func (m *Manager) NodeAllocatable() v1.ResourceList {
	c := m.Capacity()
	if c == nil {
		return nil
	}
	return Allocatable(c, Reservation(c, m.cfg.SystemReserved, m.cfg.KubeReserved, m.cfg.HardEvictionThresholds))
}

// EnforcesPodsAllocatable reports whether the pods cgroup is limited to
// the node's allocatable ("pods" in EnforceNodeAllocatable, the default):
// the eviction manager then also watches allocatableMemory.available, as
// the kubelet derives it from the same setting.
func (m *Manager) EnforcesPodsAllocatable() bool { return m.enforce }

// EnforcedAllocatable is the limit put on the pods cgroup: capacity minus
// system- and kube-reserved (or the whole capacity when enforcement is off).
func (m *Manager) EnforcedAllocatable() v1.ResourceList {
	c := m.Capacity()
	if c == nil {
		return nil
	}
	if !m.enforce {
		return c
	}
	return EnforcedAllocatable(c, m.cfg.SystemReserved, m.cfg.KubeReserved)
}

// Start checks the reservation against the capacity, finds the cgroup
// mode, creates the pods cgroup with the enforced allocatable limit (a
// failure to set it is logged and retried by Run) and the burstable and
// besteffort cgroups. Calling it again after a success does nothing; the
// hooks and Run call it when needed.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.startLocked(ctx)
}

func (m *Manager) startLocked(ctx context.Context) error {
	if m.started {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	capacity, err := m.capacityLocked()
	if err != nil {
		return err
	}
	if err := ValidateReservation(capacity, Reservation(capacity, m.cfg.SystemReserved, m.cfg.KubeReserved, m.cfg.HardEvictionThresholds)); err != nil {
		return err
	}
	if m.cfg.DisableCgroupsPerQOS {
		m.started = true
		m.log.Info("cgroups per QoS disabled: no QoS tree or pod cgroups")
		return nil
	}
	cgm, err := m.newCgroupManager()
	if err != nil {
		return err
	}
	if err := cgm.Create(m.pods, nil); err != nil {
		return fmt.Errorf("creating the pods cgroup: %w", err)
	}
	m.cgm = cgm
	m.applyAllocatableLocked()
	for _, class := range []v1.PodQOSClass{v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		if err := cgm.Create(m.QOSCgroupName(class), nil); err != nil {
			m.cgm = nil
			return fmt.Errorf("creating the %s QoS cgroup: %w", class, err)
		}
	}
	if err := m.updateQOSLocked(m.activeLocked()); err != nil {
		m.cgm = nil
		return err
	}
	m.started = true
	m.log.Info("container manager started", zap.String("root", m.cfg.CgroupRoot), zap.String("version", string(cgm.Version())),
		zap.String("driver", string(cgm.Driver())), zap.String("pods", cgm.Name(m.pods)), zap.Bool("enforceAllocatable", m.enforce))
	return nil
}

// newCgroupManager detects the mode (or uses the configured version on an
// ordinary directory) and builds the cgroup manager.
func (m *Manager) newCgroupManager() (*CgroupManager, error) {
	version, emulated := m.cfg.CgroupVersion, false
	mode, err := DetectMode(m.cfg.CgroupRoot)
	switch {
	case err != nil && version == "":
		return nil, err
	case err != nil:
		emulated = true
		m.log.Info("cgroup root is not a cgroup file system: emulating the hierarchy in plain files",
			zap.String("root", m.cfg.CgroupRoot), zap.String("version", string(version)))
	case version != "" && version != mode.Version():
		return nil, fmt.Errorf("%w: CgroupVersion %s configured, but %s is %s", ErrUnsupportedCgroupMode, version, m.cfg.CgroupRoot, mode)
	default:
		version = mode.Version()
		if mode == ModeHybrid {
			m.log.Info("hybrid cgroup host: using the v1 hierarchies, ignoring the v2 mount at unified/", zap.String("root", m.cfg.CgroupRoot))
		}
	}
	return NewCgroupManager(CgroupManagerConfig{Root: m.cfg.CgroupRoot, Version: version, Driver: m.cfg.CgroupDriver, Emulated: emulated, Logger: m.log})
}

// applyAllocatableLocked writes the enforced allocatable to the pods cgroup.
func (m *Manager) applyAllocatableLocked() {
	if m.cgm == nil || m.allocIsSet {
		return
	}
	capacity, err := m.capacityLocked()
	if err != nil {
		return
	}
	limits := capacity
	if m.enforce {
		limits = EnforcedAllocatable(capacity, m.cfg.SystemReserved, m.cfg.KubeReserved)
	}
	err = m.cgm.Update(m.pods, ResourceConfigForLimits(limits))
	m.count("enforce_allocatable", err)
	rec, node := kubetypes.RecorderOrNop(m.cfg.Recorder), kubetypes.NodeRef(m.cfg.NodeName)
	if err != nil {
		rec.Eventf(node, v1.EventTypeWarning, kubetypes.ReasonFailedNodeAllocatableEnforcement,
			"Failed to update Node Allocatable Limits %q: %v", m.cgm.Name(m.pods), err)
		if !m.allocErrLog {
			m.log.Warn("node allocatable limit not set on the pods cgroup; retrying every QOSUpdatePeriod", zap.Error(err))
			m.allocErrLog = true
		}
		return
	}
	m.allocIsSet = true
	rec.Event(node, v1.EventTypeNormal, kubetypes.ReasonNodeAllocatableEnforced, "Updated Node Allocatable limit across pods")
	m.log.Info("node allocatable limit set on the pods cgroup", zap.String("cgroup", m.cgm.Name(m.pods)), zap.Any("limits", limits))
}

// activeLocked lists the tracked pods (or Config.ActivePods).
func (m *Manager) activeLocked() []*v1.Pod {
	if m.cfg.ActivePods != nil {
		return m.cfg.ActivePods()
	}
	out := make([]*v1.Pod, 0, len(m.active))
	for _, p := range m.active {
		out = append(out, p)
	}
	return out
}

// withoutPod returns pods less the one with this UID.
func withoutPod(pods []*v1.Pod, uid types.UID) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		if p != nil && p.UID != uid {
			out = append(out, p)
		}
	}
	return out
}

// BurstableShares is the cpu.shares of the burstable cgroup for these
// pods: the sum of the Burstable pods' cpu requests.
func (m *Manager) BurstableShares(activePods []*v1.Pod) uint64 {
	var milli int64
	for _, p := range activePods {
		if p == nil || QOSClass(p) != v1.PodQOSBurstable {
			continue
		}
		milli += amountsOf(p).cpuReq
	}
	return MilliCPUToShares(milli)
}

// UpdateQOSCgroups sets the burstable cgroup's shares from the Burstable
// pods among activePods and besteffort's to MinShares. It starts the
// manager first when needed.
func (m *Manager) UpdateQOSCgroups(ctx context.Context, activePods []*v1.Pod) error {
	if m.cfg.DisableCgroupsPerQOS {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startLocked(ctx); err != nil {
		return err
	}
	return m.updateQOSLocked(activePods)
}

func (m *Manager) updateQOSLocked(activePods []*v1.Pod) error {
	burst, best := m.BurstableShares(activePods), MinShares
	err := errors.Join(
		m.cgm.Update(m.QOSCgroupName(v1.PodQOSBurstable), &ResourceConfig{CPUShares: &burst}),
		m.cgm.Update(m.QOSCgroupName(v1.PodQOSBestEffort), &ResourceConfig{CPUShares: &best}),
	)
	m.count("update_qos", err)
	if err != nil {
		return fmt.Errorf("updating the QoS cgroups: %w", err)
	}
	return nil
}

// EnsurePodCgroup creates the pod's cgroup when missing, with the values of
// ResourceConfigForPod, after updating the QoS cgroups for the pod. An
// existing cgroup is left as it is. The pod is tracked as active.
func (m *Manager) EnsurePodCgroup(ctx context.Context, pod *v1.Pod) error {
	if m.cfg.DisableCgroupsPerQOS || pod == nil {
		return nil
	}
	name, err := m.PodCgroupName(pod)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startLocked(ctx); err != nil {
		return err
	}
	m.active[pod.UID] = pod
	if m.cgm.Exists(name) {
		return nil
	}
	if err := m.updateQOSLocked(m.activeLocked()); err != nil {
		m.log.Warn("QoS cgroups not updated before a new pod cgroup", zap.Error(err))
	}
	err = m.cgm.Create(name, ResourceConfigForPod(pod, m.podOpts))
	m.count("create_pod", err)
	if err != nil {
		return fmt.Errorf("creating the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	m.log.Debug("pod cgroup created", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("cgroup", m.cgm.Name(name)))
	return nil
}

// DestroyPodCgroup removes the pod's cgroup once its containers are gone:
// processes still in it are killed (and logged), then the cgroup is
// removed and the QoS cgroups updated. The pod stops being tracked.
func (m *Manager) DestroyPodCgroup(ctx context.Context, pod *v1.Pod) error {
	if m.cfg.DisableCgroupsPerQOS || pod == nil {
		return nil
	}
	name, err := m.PodCgroupName(pod)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.active, pod.UID)
	if !m.started {
		if err := m.startLocked(ctx); err != nil {
			return err
		}
	}
	if err := m.removeLocked(name, pod.Namespace+"/"+pod.Name); err != nil {
		return err
	}
	// Config.ActivePods may still list the pod (it is being torn down);
	// its requests no longer count towards the burstable shares.
	if err := m.updateQOSLocked(withoutPod(m.activeLocked(), pod.UID)); err != nil {
		m.log.Warn("QoS cgroups not updated after a pod cgroup removal", zap.Error(err))
	}
	return nil
}

// removeLocked kills what is left in a pod cgroup and removes it.
func (m *Manager) removeLocked(name CgroupName, who string) error {
	pids, err := m.cgm.Pids(name)
	if err != nil {
		return fmt.Errorf("listing the processes of %s: %w", m.cgm.Name(name), err)
	}
	if len(pids) > 0 {
		m.log.Warn("killing processes left in a pod cgroup before removing it", zap.String("pod", who),
			zap.String("cgroup", m.cgm.Name(name)), zap.Ints("pids", pids))
		for _, pid := range pids {
			if err := m.cfg.KillProcess(pid); err != nil && !errors.Is(err, unix.ESRCH) {
				m.log.Warn("kill failed", zap.Int("pid", pid), zap.Error(err))
			}
		}
	}
	err = m.cgm.Destroy(name)
	m.count("destroy_pod", err)
	if err != nil {
		return err
	}
	m.log.Debug("pod cgroup removed", zap.String("pod", who), zap.String("cgroup", m.cgm.Name(name)))
	return nil
}

// CleanupOrphans removes the pod cgroups (under the pods, burstable and
// besteffort cgroups) of pods not in activePods. Nothing is removed until
// sourcesReady: before every pod source has been heard from, a missing pod
// may just not be known yet. Processes left in an orphan are killed (and
// logged) first; an orphan whose processes survive stays for the next call.
// It returns how many cgroups were removed.
func (m *Manager) CleanupOrphans(ctx context.Context, activePods []*v1.Pod, sourcesReady bool) (int, error) {
	if m.cfg.DisableCgroupsPerQOS || !sourcesReady {
		return 0, nil
	}
	keep := make(map[string]bool, len(activePods))
	for _, p := range activePods {
		if p != nil {
			keep["pod"+string(p.UID)] = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.startLocked(ctx); err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, class := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		children, err := m.cgm.Children(m.QOSCgroupName(class))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, c := range children {
			last := c[len(c)-1]
			if !strings.HasPrefix(last, "pod") || keep[last] {
				continue
			}
			if ctx.Err() != nil {
				return removed, errors.Join(append(errs, ctx.Err())...)
			}
			if err := m.removeLocked(c, "orphan "+strings.TrimPrefix(last, "pod")); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	if removed > 0 {
		m.log.Info("orphaned pod cgroups removed", zap.Int("count", removed))
		// The removed pods stop being tracked; the burstable shares follow
		// the pods that are left.
		for uid := range m.active {
			if !keep["pod"+string(uid)] {
				delete(m.active, uid)
			}
		}
		if err := m.updateQOSLocked(m.activeLocked()); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// Run starts the manager (Start) and then, every QOSUpdatePeriod, updates
// the QoS cgroups from the active pods and retries the allocatable limit
// until it is set. It returns nil when ctx ends, or Start's error.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	if err := m.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if m.cfg.DisableCgroupsPerQOS {
		<-ctx.Done()
		return nil
	}
	t := m.clock.NewTicker(m.cfg.QOSUpdatePeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.SyncOnce()
		}
	}
}

// SyncOnce is one periodic step of Run: retry the allocatable limit, update
// the QoS cgroups (errors are logged).
func (m *Manager) SyncOnce() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started || m.cgm == nil {
		return
	}
	m.applyAllocatableLocked()
	if err := m.updateQOSLocked(m.activeLocked()); err != nil {
		m.log.Warn("periodic QoS cgroup update failed", zap.Error(err))
	}
}

// UseEventRecorder gives a manager built without Config.Recorder the
// recorder (and node name) of the agent it is wired into. It must be
// called before Start; a manager that has a recorder keeps it.
func (m *Manager) UseEventRecorder(r kubetypes.EventRecorder, nodeName string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cfg.Recorder == nil {
		m.cfg.Recorder, m.cfg.NodeName = r, nodeName
	}
}
