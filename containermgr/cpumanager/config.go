package cpumanager

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// Policy names, as in the kubelet's --cpu-manager-policy.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// DefaultReconcilePeriod is how often Run applies the cpusets (the
// kubelet's --cpu-manager-reconcile-period).
const DefaultReconcilePeriod = 10 * time.Second

// Runtime is what the manager needs from CRI: the running containers
// (with the io.kubernetes.pod.uid and io.kubernetes.container.name
// labels), a container's status (its current cpuset, for rebuilding a
// lost state at Start) and a resources update. runtime/remote.Client and
// runtime/fake.Runtime satisfy it.
type Runtime interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error
}

// Config configures a Manager.
type Config struct {
	// Policy is PolicyNone (default) or PolicyStatic.
	Policy string
	// Topology is the machine (topology.Discover). Required for static.
	Topology *topology.Topology
	// ReservedCPUs are kept for system and kube daemons: they stay in the
	// shared pool and are never given exclusively. When empty,
	// NumReservedCPUs CPUs are chosen by topology (the kubelet's way: with
	// hyper-threads, the sibling threads of the lowest cores). When both
	// are set their sizes must agree. Static needs at least one.
	ReservedCPUs    cpuset.CPUSet
	NumReservedCPUs int
	// StateDir holds the cpu_manager_state checkpoint. Required.
	StateDir string
	// Runtime is used by Reconcile and Run; nil makes Reconcile only purge
	// stale state.
	Runtime Runtime
	// CurrentCPUSet, when set, reports the cpuset (Linux list format) a
	// running container is confined to now, for rebuilding lost
	// assignments at Start (for example read from the container's cpuset
	// cgroup). When nil the cpuset CRI ContainerStatus reports in
	// Status.Resources.Linux.CpusetCpus is used; a runtime that does not
	// report it leaves nothing to rebuild from.
	CurrentCPUSet func(ctx context.Context, containerID string) (string, error)
	// SourcesReady says whether every pod source has delivered its pods;
	// assignments of pods that are no longer active are purged only then.
	// Nil means always ready.
	SourcesReady func() bool
	// ReconcilePeriod is Run's period; default DefaultReconcilePeriod.
	ReconcilePeriod time.Duration

	Clock      clock.Clock
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() (Config, cpuset.CPUSet, error) {
	if c.Policy == "" {
		c.Policy = PolicyNone
	}
	if c.StateDir == "" {
		return c, cpuset.New(), fmt.Errorf("%w: StateDir is required", ErrInvalidConfig)
	}
	if c.ReconcilePeriod < 0 {
		return c, cpuset.New(), fmt.Errorf("%w: ReconcilePeriod must not be negative (got %v)", ErrInvalidConfig, c.ReconcilePeriod)
	}
	if c.ReconcilePeriod == 0 {
		c.ReconcilePeriod = DefaultReconcilePeriod
	}
	if c.NumReservedCPUs < 0 {
		return c, cpuset.New(), fmt.Errorf("%w: NumReservedCPUs must not be negative (got %d)", ErrInvalidConfig, c.NumReservedCPUs)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	c.Logger = c.Logger.Named("cpumanager")
	if c.SourcesReady == nil {
		c.SourcesReady = func() bool { return true }
	}
	reserved := cpuset.New()
	switch c.Policy {
	case PolicyNone:
	case PolicyStatic:
		if c.Topology == nil {
			return c, reserved, fmt.Errorf("%w: Topology is required for the static policy", ErrInvalidConfig)
		}
		n := c.NumReservedCPUs
		switch {
		case c.ReservedCPUs.Size() > 0:
			if n != 0 && n != c.ReservedCPUs.Size() {
				return c, reserved, fmt.Errorf("%w: ReservedCPUs %q has %d cpus but NumReservedCPUs is %d", ErrInvalidConfig, c.ReservedCPUs, c.ReservedCPUs.Size(), n)
			}
			if !c.ReservedCPUs.IsSubsetOf(c.Topology.All()) {
				return c, reserved, fmt.Errorf("%w: ReservedCPUs %q are not all cpus of the machine (%q)", ErrInvalidConfig, c.ReservedCPUs, c.Topology.All())
			}
			reserved = c.ReservedCPUs.Clone()
		case n > 0:
			if n > c.Topology.NumCPUs() {
				return c, reserved, fmt.Errorf("%w: NumReservedCPUs %d exceeds the machine's %d cpus", ErrInvalidConfig, n, c.Topology.NumCPUs())
			}
			set, err := newAllocator(c.Topology).take(c.Topology.All(), n)
			if err != nil {
				return c, reserved, fmt.Errorf("%w: NumReservedCPUs: %w", ErrInvalidConfig, err)
			}
			reserved = set
		default:
			return c, reserved, fmt.Errorf("%w: the static policy needs reserved cpus (ReservedCPUs or NumReservedCPUs > 0)", ErrInvalidConfig)
		}
	default:
		return c, reserved, fmt.Errorf("%w: Policy %q is not %q or %q", ErrInvalidConfig, c.Policy, PolicyNone, PolicyStatic)
	}
	return c, reserved, nil
}
