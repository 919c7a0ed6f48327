package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// NodeSink is where node objects go: the API server (package
// nodestatus/apiserver) or a local file or callback (Local).
type NodeSink interface {
	// Register makes sure the node exists. node is the agent's initial
	// node (metadata and a first status); a sink that already holds the
	// node reconciles what the agent owns and keeps the rest.
	Register(ctx context.Context, node *v1.Node) (*v1.Node, error)
	// Get returns the node as the sink holds it. With fresh false it may
	// come from a cache (the first try of an update); with fresh true it
	// must be read from the source.
	Get(ctx context.Context, fresh bool) (*v1.Node, error)
	// PatchStatus stores node's status (and the labels the agent keeps),
	// computed from original as Get returned it, and returns the stored
	// node.
	PatchStatus(ctx context.Context, original, node *v1.Node) (*v1.Node, error)
}

// Defaults, as the kubelet has them.
const (
	DefaultUpdateFrequency    = 10 * time.Second
	DefaultReportFrequency    = 5 * time.Minute
	DefaultUpdateRetries      = 5
	DefaultFastUpdateInterval = 100 * time.Millisecond
	DefaultFastUpdateTimeout  = 120 * time.Second
	DefaultRegisterBackoff    = 100 * time.Millisecond
	DefaultMaxRegisterBackoff = 7 * time.Second
	// updateJitter is the fraction the update period is stretched by at
	// random.
	updateJitter = 0.04
)

// Well-known labels the agent puts on its node.
const (
	labelHostname = "kubernetes.io/hostname"
	labelOS       = "kubernetes.io/os"
	labelArch     = "kubernetes.io/arch"
	labelBetaOS   = "beta.kubernetes.io/os"
	labelBetaArch = "beta.kubernetes.io/arch"
)

// Config configures a Controller.
type Config struct {
	// NodeName is the node object's name (required, a DNS subdomain).
	NodeName string
	// Hostname is the kubernetes.io/hostname label; "" = NodeName.
	Hostname string
	// Labels are added to the initial node (they win over the defaults).
	Labels map[string]string
	// Taints the node registers with.
	Taints []v1.Taint
	// Setters fill the status, in order (see DefaultSetters).
	Setters []Setter
	// Sink stores the node (required).
	Sink NodeSink

	// UpdateFrequency is how often the status is computed (10s).
	UpdateFrequency time.Duration
	// ReportFrequency is how often an unchanged status is still sent (5m),
	// stretched or shrunk by a random delay of up to half of it after each
	// change.
	ReportFrequency time.Duration
	// UpdateRetries is how many tries one update gets (5).
	UpdateRetries int
	// FastUpdateInterval and FastUpdateTimeout: after registration the
	// status is computed every FastUpdateInterval (100ms) until the node
	// is Ready or FastUpdateTimeout (120s) passed; a negative timeout turns
	// this off.
	FastUpdateInterval time.Duration
	FastUpdateTimeout  time.Duration
	// RegisterBackoff and MaxRegisterBackoff space failed registrations
	// (100ms doubling up to 7s).
	RegisterBackoff    time.Duration
	MaxRegisterBackoff time.Duration

	// OnRepeatedHeartbeatFailure is called after each failed try of an
	// update but the first (the API sink closes idle connections there).
	OnRepeatedHeartbeatFailure func()
	// OnReported, if set, gets the node as stored after each update (also
	// when nothing had to be sent), e.g. to mark volumes reported in use.
	// It must not keep or change the node.
	OnReported func(node *v1.Node)
	// Rand returns a number in [0,1) for the report delay and jitter; nil
	// = math/rand/v2.
	Rand func() float64
	// UpdateNow, when set, cuts the wait before the next status update
	// short whenever it delivers (e.g. the node began shutting down:
	// Agent.NodeStatusUpdateRequests).
	UpdateNow <-chan struct{}

	// Recorder records the kubelet's node events when the setters change
	// the status: NodeReady / NodeNotReady when Ready flips,
	// NodeHasSufficientMemory / NodeHasInsufficientMemory,
	// NodeHasNoDiskPressure / NodeHasDiskPressure and NodeHasSufficientPID
	// / NodeHasInsufficientPID when a pressure condition is first set or
	// flips, and Rebooted (once) when the boot ID changed. Nil records none.
	Recorder kubetypes.EventRecorder

	Clock  clock.Clock
	Logger *zap.Logger
}

// Controller registers the node with a NodeSink and keeps its status up
// to date with the kubelet's rules.
type Controller struct {
	cfg Config
	clk clock.Clock
	log *zap.Logger

	mu         sync.Mutex // serializes SyncOnce and guards the fields below
	registered bool
	lastReport time.Time
	delay      time.Duration

	readyOnce sync.Once
	ready     chan struct{}

	// recorded is the last condition status recorded as an event per
	// condition type, so that retries and a status that could not be
	// stored do not record one change twice; rebooted: Rebooted was
	// recorded.
	recorded map[v1.NodeConditionType]v1.ConditionStatus
	rebooted bool

	once lifecycle.Once
}

// New validates cfg and fills defaults. It does no I/O.
func New(cfg Config) (*Controller, error) {
	var errs []error
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig))
	} else if msgs := validation.IsDNS1123Subdomain(cfg.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("%w: NodeName %q: %v", ErrInvalidConfig, cfg.NodeName, msgs))
	}
	if cfg.Sink == nil {
		errs = append(errs, fmt.Errorf("%w: Sink is required", ErrInvalidConfig))
	}
	for i, s := range cfg.Setters {
		if s == nil {
			errs = append(errs, fmt.Errorf("%w: Setters[%d] is nil", ErrInvalidConfig, i))
		}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"UpdateFrequency", &cfg.UpdateFrequency, DefaultUpdateFrequency},
		{"ReportFrequency", &cfg.ReportFrequency, DefaultReportFrequency},
		{"FastUpdateInterval", &cfg.FastUpdateInterval, DefaultFastUpdateInterval},
		{"RegisterBackoff", &cfg.RegisterBackoff, DefaultRegisterBackoff},
		{"MaxRegisterBackoff", &cfg.MaxRegisterBackoff, DefaultMaxRegisterBackoff},
	} {
		switch {
		case *d.v < 0:
			errs = append(errs, fmt.Errorf("%w: %s must not be negative, got %v", ErrInvalidConfig, d.name, *d.v))
		case *d.v == 0:
			*d.v = d.def
		}
	}
	if cfg.FastUpdateTimeout == 0 {
		cfg.FastUpdateTimeout = DefaultFastUpdateTimeout
	}
	if cfg.UpdateRetries < 0 {
		errs = append(errs, fmt.Errorf("%w: UpdateRetries must not be negative, got %d", ErrInvalidConfig, cfg.UpdateRetries))
	} else if cfg.UpdateRetries == 0 {
		cfg.UpdateRetries = DefaultUpdateRetries
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Controller{
		cfg:   cfg,
		clk:   cfg.Clock,
		log:   cfg.Logger.Named("nodestatus").With(zap.String("node", cfg.NodeName)),
		ready: make(chan struct{}),
	}, nil
}

// Ready is closed once a stored status said the node is Ready.
func (c *Controller) Ready() <-chan struct{} { return c.ready }

// InitialNode is the node the agent registers: name, the default labels
// (hostname, os, arch), Config.Labels, Config.Taints and a status from the
// setters.
func (c *Controller) InitialNode(ctx context.Context) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.cfg.NodeName,
			Labels: map[string]string{
				labelHostname: c.cfg.Hostname,
				labelOS:       runtime.GOOS,
				labelArch:     runtime.GOARCH,
				labelBetaOS:   runtime.GOOS,
				labelBetaArch: runtime.GOARCH,
			},
		},
	}
	for k, v := range c.cfg.Labels {
		node.Labels[k] = v
	}
	if len(c.cfg.Taints) > 0 {
		node.Spec.Taints = append([]v1.Taint(nil), c.cfg.Taints...)
	}
	c.setStatus(ctx, node)
	return node
}

func (c *Controller) setStatus(ctx context.Context, node *v1.Node) {
	before := conditionStatuses(node)
	bootID := node.Status.NodeInfo.BootID
	for i, s := range c.cfg.Setters {
		if err := s(ctx, node); err != nil {
			c.log.Warn("node status setter failed", zap.Int("setter", i), zap.Error(err))
		}
	}
	c.recordEvents(node, before, bootID)
}

// Register makes one attempt to register the node.
func (c *Controller) Register(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.registerLocked(ctx)
}

func (c *Controller) registerLocked(ctx context.Context) error {
	if c.registered {
		return nil
	}
	stored, err := c.cfg.Sink.Register(ctx, c.InitialNode(ctx))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRegister, err)
	}
	c.registered = true
	c.log.Info("node registered")
	c.reported(stored)
	return nil
}

// SyncOnce registers the node if it is not yet (one attempt) and then
// updates its status: up to UpdateRetries tries, the first from the sink's
// cache, later ones fresh. A try sends the status only if it changed (more
// than heartbeats) or the report period (plus the random delay) is up.
func (c *Controller) SyncOnce(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.registerLocked(ctx); err != nil {
		return err
	}
	var errs []error
	for try := range c.cfg.UpdateRetries {
		err := c.tryUpdate(ctx, try)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		errs = append(errs, err)
		if try > 0 && c.cfg.OnRepeatedHeartbeatFailure != nil {
			c.cfg.OnRepeatedHeartbeatFailure()
		}
		c.log.Warn("node status update failed, will retry", zap.Int("try", try), zap.Error(err))
	}
	return fmt.Errorf("%w: %w", ErrUpdateRetries, errors.Join(errs...))
}

func (c *Controller) tryUpdate(ctx context.Context, try int) error {
	original, err := c.cfg.Sink.Get(ctx, try > 0)
	if err != nil {
		return fmt.Errorf("getting node %q: %w", c.cfg.NodeName, err)
	}
	if original == nil {
		return fmt.Errorf("getting node %q: sink returned no node", c.cfg.NodeName)
	}
	node := original.DeepCopy()
	labelsFixed := false
	for k, v := range map[string]string{labelOS: runtime.GOOS, labelArch: runtime.GOARCH} {
		if node.Labels[k] != v {
			if node.Labels == nil {
				node.Labels = map[string]string{}
			}
			node.Labels[k] = v
			labelsFixed = true
		}
	}
	c.setStatus(ctx, node)
	changed := labelsFixed || StatusChanged(&original.Status, &node.Status)
	if !changed && !c.reportDue() {
		c.reported(original)
		return nil
	}
	if changed || c.lastReport.IsZero() {
		c.delay = ReportDelay(c.cfg.ReportFrequency, c.cfg.Rand())
	} else {
		c.delay = 0
	}
	stored, err := c.cfg.Sink.PatchStatus(ctx, original, node)
	if err != nil {
		return err
	}
	c.lastReport = c.clk.Now()
	c.reported(stored)
	return nil
}

// reportDue: the report period (plus the random delay) has passed since
// the last report. A last report in the future means the clock went back
// (e.g. a device that booted in 1970 got NTP time, or the other way round):
// then a report is due now, which restarts the period from the new time,
// instead of waiting for the clock to come back to the old one.
func (c *Controller) reportDue() bool {
	since := c.clk.Since(c.lastReport)
	return since < 0 || since >= c.cfg.ReportFrequency+c.delay
}

func (c *Controller) reported(node *v1.Node) {
	if node == nil {
		return
	}
	if conditionTrue(node, v1.NodeReady) {
		c.readyOnce.Do(func() {
			c.log.Info("node is ready")
			close(c.ready)
		})
	}
	if c.cfg.OnReported != nil {
		c.cfg.OnReported(node)
	}
}

// ReportDelay is the random change to the report period after a status
// change: period × (r − 0.5), for r in [0,1), so within ±period/2.
func ReportDelay(period time.Duration, r float64) time.Duration {
	if r < 0 || r >= 1 || r != r {
		r = 0.5
	}
	return time.Duration(float64(period) * (r - 0.5))
}

// Run registers the node (retrying with back-off), updates the status every
// FastUpdateInterval until the node is Ready or FastUpdateTimeout passed,
// then every UpdateFrequency (with a little jitter), until ctx ends. It
// returns nil when ctx ends. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.once.Start(); err != nil {
		return err
	}

	backoff := c.cfg.RegisterBackoff
	for {
		err := c.Register(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		c.log.Warn("node registration failed, will retry", zap.Duration("backoff", backoff), zap.Error(err))
		if !c.wait(ctx, backoff) {
			return nil
		}
		backoff = min(2*backoff, c.cfg.MaxRegisterBackoff)
	}
	// The fast phase is measured in time waited, not by the wall clock,
	// so that a clock jump neither stretches it (a jump back would make it
	// last until the clock comes back) nor cuts it short.
	var fastWaited time.Duration
	for {
		if err := c.SyncOnce(ctx); err != nil && ctx.Err() == nil {
			c.log.Error("unable to update node status", zap.Error(err))
		}
		if ctx.Err() != nil {
			return nil
		}
		next := c.cfg.UpdateFrequency
		next += time.Duration(float64(next) * updateJitter * c.cfg.Rand())
		if c.cfg.FastUpdateTimeout > 0 && fastWaited < c.cfg.FastUpdateTimeout {
			select {
			case <-c.ready:
				fastWaited = c.cfg.FastUpdateTimeout
			default:
				next = c.cfg.FastUpdateInterval
				fastWaited += next
			}
		}
		if !c.wait(ctx, next) {
			return nil
		}
	}
}

func (c *Controller) wait(ctx context.Context, d time.Duration) bool {
	t := c.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	case <-c.cfg.UpdateNow:
		return true
	}
}
