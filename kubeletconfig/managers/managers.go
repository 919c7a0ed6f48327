package managers

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kc "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/containermgr/cpumanager"
	"github.com/nodekit/nodekit/containermgr/memorymanager"
	"github.com/nodekit/nodekit/containermgr/topology"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kubeletconfig"
)

// Fields are the configuration fields Part maps.
const Fields = "cgroupDriver cgroupRoot cgroupsPerQOS kubeReserved systemReserved kubeReservedCgroup systemReservedCgroup " +
	"enforceNodeAllocatable podPidsLimit cpuCFSQuota cpuCFSQuotaPeriod " +
	"cpuManagerPolicy reservedSystemCPUs cpuManagerReconcilePeriod memoryManagerPolicy reservedMemory " +
	"evictionHard evictionSoft evictionSoftGracePeriod evictionMinimumReclaim evictionPressureTransitionPeriod " +
	"evictionMaxPodGracePeriod mergeDefaultEvictionSettings localStorageCapacityIsolation kernelMemcgNotification " +
	"imageGCHighThresholdPercent imageGCLowThresholdPercent imageMinimumGCAge imageMaximumGCAge"

// Options are what Part needs besides the configuration.
type Options struct {
	// StateDir holds the CPU and memory managers' checkpoints (the
	// kubelet's root directory; required with cpuManagerPolicy static or
	// memoryManagerPolicy Static).
	StateDir string
	// CgroupFS is where the cgroup file system is mounted (default
	// /sys/fs/cgroup); CgroupVersion forces v1 or v2 (default: detected).
	// Tests use a temp dir with a version.
	CgroupFS      string
	CgroupVersion containermgr.Version
	// Capacity overrides the machine's (default: read from /proc).
	Capacity v1.ResourceList
	// SysRoot is where sysfs is found for the CPU topology and the NUMA
	// nodes' memory ("" = "/"); Topology and Machine override them.
	SysRoot  string
	Topology *topology.Topology
	Machine  []memorymanager.NUMANode
	// Built, when set, gets what Part made.
	Built *Built
	// Logger for the managers (default: none).
	Logger *zap.Logger
}

// Built is what Part made.
type Built struct {
	// ContainerManager is the container manager.
	ContainerManager *containermgr.Manager
	// Eviction are the eviction parts, filled in by Build (the manager is
	// the node status' pressure source).
	Eviction nodekit.EvictionParts
}

// Reservation is what the node holds back from its capacity (system- and
// kube-reserved and the hard eviction thresholds), for the Node's
// allocatable (clusterapiserver.Config.Reservation); nil before Part's
// Apply ran.
func (b *Built) Reservation() v1.ResourceList {
	if b == nil || b.ContainerManager == nil {
		return nil
	}
	capacity, alloc := b.ContainerManager.Capacity(), b.ContainerManager.NodeAllocatable()
	out := v1.ResourceList{}
	for name, c := range capacity {
		a, ok := alloc[name]
		if !ok {
			continue
		}
		r := c.DeepCopy()
		r.Sub(a)
		out[name] = r
	}
	return out
}

// Part maps the cgroup, resource manager and eviction fields of a
// configuration (Fields) to the parts that honour them, for an agent that
// runs its pods in cgroups on this host:
//
//   - a container manager (cmwire.ContainerManager): cgroupDriver,
//     cgroupsPerQOS, kubeReserved and systemReserved (held back from
//     allocatable and, with "pods" in enforceNodeAllocatable, from the pods
//     cgroup), the hard eviction thresholds held back from allocatable,
//     podPidsLimit, cpuCFSQuota and cpuCFSQuotaPeriod;
//   - with cpuManagerPolicy static a CPU manager (cmwire.CPUManager):
//     reservedSystemCPUs (or the CPUs kubeReserved and systemReserved
//     hold), cpuManagerReconcilePeriod;
//   - with memoryManagerPolicy Static a memory manager
//     (cmwire.MemoryManager): reservedMemory;
//   - node-pressure eviction with image GC (WithEvictionOptions): the
//     eviction thresholds, grace periods and minimum reclaims, the pressure
//     transition period, evictionMaxPodGracePeriod,
//     localStorageCapacityIsolation, kernelMemcgNotification (the memcg
//     notifier), the image GC thresholds and ages.
//
// cgroupRoot other than "/" and enforceNodeAllocatable with system-reserved
// or kube-reserved cannot be honoured (the container manager puts its
// kubepods cgroup at the root and enforces only on it). Apply reads the
// machine's NUMA nodes and CPU topology when a static policy needs them.
func Part(opts Options) kubeletconfig.Part {
	return kubeletconfig.Part{Name: "cgroups and resource managers", Fields: kubeletconfig.FieldsOf(Fields),
		Apply: func(b *nodekit.Builder, c *kc.KubeletConfiguration) error { return apply(b, c, opts) }}
}

func cannot(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", kubeletconfig.ErrCannotHonour, field, fmt.Sprintf(format, args...))
}

func apply(b *nodekit.Builder, c *kc.KubeletConfiguration, opts Options) error {
	var errs []error
	if c.CgroupRoot != "" && c.CgroupRoot != "/" {
		errs = append(errs, cannot("cgroupRoot", "%q: the agent's pods cgroup (kubepods) is at the root of the hierarchy", c.CgroupRoot))
	}
	for _, e := range c.EnforceNodeAllocatable {
		if e != containermgr.EnforcePods && e != "none" {
			errs = append(errs, cannot("enforceNodeAllocatable", "%q: only %q and \"none\" are enforced", e, containermgr.EnforcePods))
		}
	}
	kubeRes, kubeErrs := resources("kubeReserved", c.KubeReserved)
	errs = append(errs, kubeErrs...)
	sysRes, sysErrs := resources("systemReserved", c.SystemReserved)
	errs = append(errs, sysErrs...)
	thresholds, thErr := eviction.ParseThresholds(c.EvictionHard, c.EvictionSoft, c.EvictionSoftGracePeriod, c.EvictionMinimumReclaim)
	if thErr != nil {
		errs = append(errs, fmt.Errorf("eviction: %w", thErr))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var hard []containermgr.EvictionThreshold
	for _, t := range thresholds {
		if t.IsHard() {
			hard = append(hard, containermgr.EvictionThreshold{Signal: string(t.Signal), Quantity: t.Value.Quantity, Percentage: t.Value.Percentage})
		}
	}
	driver := containermgr.DriverCgroupfs
	if c.CgroupDriver == "systemd" {
		driver = containermgr.DriverSystemd
	}
	cm, err := containermgr.New(containermgr.Config{
		CgroupRoot: opts.CgroupFS, CgroupVersion: opts.CgroupVersion, CgroupDriver: driver,
		DisableCgroupsPerQOS: !*c.CgroupsPerQOS, SystemReserved: sysRes, KubeReserved: kubeRes,
		HardEvictionThresholds: hard, EnforceNodeAllocatable: c.EnforceNodeAllocatable,
		PodPidsLimit: *c.PodPidsLimit, DisableCPUCFSQuota: !*c.CPUCFSQuota, CPUCFSQuotaPeriod: c.CPUCFSQuotaPeriod.Duration,
		Capacity: opts.Capacity, Logger: opts.Logger,
	})
	if err != nil {
		return fmt.Errorf("container manager: %w", err)
	}
	cmwire.ContainerManager(b, cm)
	var evictionBuilt *nodekit.EvictionParts
	if opts.Built != nil {
		opts.Built.ContainerManager = cm
		evictionBuilt = &opts.Built.Eviction
	}

	if c.CPUManagerPolicy == cpumanager.PolicyStatic {
		m, err := cpuManager(c, opts, kubeRes, sysRes)
		if err != nil {
			errs = append(errs, err)
		} else {
			cmwire.CPUManager(b, m)
		}
	} else if c.CPUManagerPolicy != cpumanager.PolicyNone {
		errs = append(errs, cannot("cpuManagerPolicy", "%q", c.CPUManagerPolicy))
	}
	if c.MemoryManagerPolicy == memorymanager.PolicyStatic {
		m, err := memoryManager(c, opts, cm, kubeRes, sysRes, hard)
		if err != nil {
			errs = append(errs, err)
		} else {
			cmwire.MemoryManager(b, m)
		}
	} else if c.MemoryManagerPolicy != memorymanager.PolicyNone {
		errs = append(errs, cannot("memoryManagerPolicy", "%q", c.MemoryManagerPolicy))
	}

	gc := imagegc.Config{HighThresholdPercent: int(*c.ImageGCHighThresholdPercent), LowThresholdPercent: int(*c.ImageGCLowThresholdPercent),
		MinAge: c.ImageMinimumGCAge.Duration, MaxAge: c.ImageMaximumGCAge.Duration}
	if gc.HighThresholdPercent == 0 && gc.LowThresholdPercent == 0 {
		// The kubelet's 0/0 is "always collect"; imagegc reads 0 as its
		// default, so say so.
		errs = append(errs, cannot("imageGCHighThresholdPercent", "0: collecting all unused images at every pass is not supported"))
	}
	b.WithEvictionOptions(eviction.Config{
		Thresholds: thresholds, DisableLocalStorageCapacityIsolation: !*c.LocalStorageCapacityIsolation,
		PressureTransitionPeriod: c.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds: int64(c.EvictionMaxPodGracePeriod),
	}, nodekit.EvictionOptions{ImageGC: gc, MemcgNotifier: c.KernelMemcgNotification, Built: evictionBuilt})
	return errors.Join(errs...)
}

// maxQuantityText bounds a reserved quantity before it is parsed.
const maxQuantityText = 64

// resources parses a kubeReserved or systemReserved map.
func resources(field string, m map[string]string) (v1.ResourceList, []error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := v1.ResourceList{}
	var errs []error
	for name, text := range m {
		q, err := resource.ParseQuantity(text)
		switch {
		case len(text) > maxQuantityText || strings.ContainsAny(text, "eE") && !strings.HasSuffix(text, "E") && !strings.HasSuffix(text, "Ei"):
			errs = append(errs, fmt.Errorf("%s: %s: %q is not a plain quantity", field, name, text))
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %s: %q: %w", field, name, text, err))
		case q.Sign() < 0:
			errs = append(errs, fmt.Errorf("%s: %s: %q is negative", field, name, text))
		default:
			out[v1.ResourceName(name)] = q
		}
	}
	return out, errs
}

func cpuManager(c *kc.KubeletConfiguration, opts Options, kubeRes, sysRes v1.ResourceList) (*cpumanager.Manager, error) {
	if opts.StateDir == "" {
		return nil, errors.New("cpuManagerPolicy static: managers.Options.StateDir is required")
	}
	topo := opts.Topology
	if topo == nil {
		var err error
		if topo, err = topology.Discover(opts.SysRoot); err != nil {
			return nil, fmt.Errorf("cpuManagerPolicy static: %w", err)
		}
	}
	cfg := cpumanager.Config{Policy: cpumanager.PolicyStatic, Topology: topo, StateDir: opts.StateDir,
		ReconcilePeriod: c.CPUManagerReconcilePeriod.Duration, Logger: opts.Logger}
	if c.ReservedSystemCPUs != "" {
		set, err := cpuset.Parse(c.ReservedSystemCPUs) // validated and bounded by kubeletconfig.Validate
		if err != nil {
			return nil, fmt.Errorf("reservedSystemCPUs: %w", err)
		}
		cfg.ReservedCPUs = set
	} else {
		// As the kubelet: the CPUs kube- and system-reserved hold, rounded up.
		milli := int64(0)
		for _, rl := range []v1.ResourceList{kubeRes, sysRes} {
			if q, ok := rl[v1.ResourceCPU]; ok {
				milli += q.MilliValue()
			}
		}
		cfg.NumReservedCPUs = int((milli + 999) / 1000)
	}
	m, err := cpumanager.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cpu manager: %w", err)
	}
	return m, nil
}

func memoryManager(c *kc.KubeletConfiguration, opts Options, cm *containermgr.Manager, kubeRes, sysRes v1.ResourceList, hard []containermgr.EvictionThreshold) (*memorymanager.Manager, error) {
	if opts.StateDir == "" {
		return nil, errors.New("memoryManagerPolicy Static: managers.Options.StateDir is required")
	}
	machine := opts.Machine
	if machine == nil {
		var err error
		if machine, err = memorymanager.ReadMachine(opts.SysRoot); err != nil {
			return nil, fmt.Errorf("memoryManagerPolicy Static: %w", err)
		}
	}
	capacity := cm.Capacity()
	reservation := v1.ResourceList{}
	for name, q := range containermgr.Reservation(capacity, sysRes, kubeRes, hard) {
		if name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			reservation[name] = q
		}
	}
	var reserved []memorymanager.Reservation
	for _, r := range c.ReservedMemory {
		reserved = append(reserved, memorymanager.Reservation{NUMANode: int(r.NumaNode), Limits: r.Limits.DeepCopy()})
	}
	m, err := memorymanager.New(memorymanager.Config{Policy: memorymanager.PolicyStatic, Machine: machine,
		ReservedMemory: reserved, NodeAllocatableReservation: reservation, StateDir: filepath.Clean(opts.StateDir), Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("memory manager: %w", err)
	}
	return m, nil
}
