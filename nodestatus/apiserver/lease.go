package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Lease defaults, as the kubelet has them.
const (
	DefaultLeaseDurationSeconds = 40
	// DefaultRenewFraction of the lease duration is the renew interval (10s
	// for 40s).
	DefaultRenewFraction   = 0.25
	DefaultLeaseRetries    = 5
	DefaultRetryBackoff    = 100 * time.Millisecond
	DefaultMaxRetryBackoff = 7 * time.Second
	renewJitter            = 0.04
	defaultLeaseNamespace  = v1.NamespaceNodeLease
	leaseOwnerAPIVersion   = "v1"
	leaseOwnerKind         = "Node"
)

// LeaseConfig configures a LeaseController.
type LeaseConfig struct {
	// Client talks to the API server with the node's credential (required).
	Client kubernetes.Interface
	// NodeName names the lease and is its holder (required).
	NodeName string
	// Namespace is "" = kube-node-lease.
	Namespace string
	// DurationSeconds is the lease duration (40).
	DurationSeconds int32
	// RenewInterval is how often the lease is renewed (DurationSeconds ×
	// 0.25 = 10s).
	RenewInterval time.Duration
	// Retries is how many update tries one renewal gets (5).
	Retries int
	// RetryBackoff and MaxRetryBackoff space renewals after a failed one
	// (100ms doubling up to 7s).
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// OnRepeatedHeartbeatFailure is called after each failed update try but
	// the first.
	OnRepeatedHeartbeatFailure func()
	// Rand returns a number in [0,1) for jitter; nil = math/rand/v2.
	Rand   func() float64
	Clock  clock.Clock
	Logger *zap.Logger
}

// LeaseController keeps the node's Lease (coordination.k8s.io/v1) renewed:
// the API server's node lifecycle controller takes a lease that is not
// renewed within its duration as the node being gone.
type LeaseController struct {
	cfg LeaseConfig
	clk clock.Clock
	log *zap.Logger

	mu     sync.Mutex // serializes SyncOnce, guards latest and renewedAt
	latest *coordinationv1.Lease
	// renewedAt is the local clock reading of the last lease written.
	renewedAt time.Time

	once lifecycle.Once
}

// NewLease validates cfg and fills defaults. It does no I/O.
func NewLease(cfg LeaseConfig) (*LeaseController, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig))
	}
	if cfg.DurationSeconds < 0 {
		errs = append(errs, fmt.Errorf("%w: DurationSeconds must not be negative, got %d", ErrInvalidConfig, cfg.DurationSeconds))
	}
	if cfg.RenewInterval < 0 || cfg.RetryBackoff < 0 || cfg.MaxRetryBackoff < 0 || cfg.Retries < 0 {
		errs = append(errs, fmt.Errorf("%w: RenewInterval, RetryBackoff, MaxRetryBackoff and Retries must not be negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Namespace == "" {
		cfg.Namespace = defaultLeaseNamespace
	}
	if cfg.DurationSeconds == 0 {
		cfg.DurationSeconds = DefaultLeaseDurationSeconds
	}
	if cfg.RenewInterval == 0 {
		cfg.RenewInterval = time.Duration(float64(cfg.DurationSeconds) * DefaultRenewFraction * float64(time.Second))
	}
	if cfg.Retries == 0 {
		cfg.Retries = DefaultLeaseRetries
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff == 0 {
		cfg.MaxRetryBackoff = DefaultMaxRetryBackoff
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
	return &LeaseController{
		cfg: cfg,
		clk: cfg.Clock,
		log: cfg.Logger.Named("nodelease").With(zap.String("node", cfg.NodeName)),
	}, nil
}

// SyncOnce renews the lease: an update of the last lease seen, up to
// Retries tries (a conflict reads the lease again); without a last lease,
// or when those tries fail, the lease is read, created if missing, and then
// updated. The lease carries an owner reference to the Node, which must
// exist: until it does, no lease is written.
func (c *LeaseController) SyncOnce(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latest != nil {
		err := c.retryUpdate(ctx, c.latest)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		c.log.Info("renewing the last lease failed, reading it again", zap.Error(err))
	}
	lease, created, err := c.ensure(ctx)
	if err != nil {
		c.latest = nil
		return err
	}
	c.latest = lease
	if created {
		return nil
	}
	return c.retryUpdate(ctx, lease)
}

// Latest returns a copy of the lease as last written or read (nil before).
func (c *LeaseController) Latest() *coordinationv1.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latest == nil {
		return nil
	}
	return c.latest.DeepCopy()
}

func (c *LeaseController) leases() interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
} {
	return c.cfg.Client.CoordinationV1().Leases(c.cfg.Namespace)
}

// ensure reads the lease, creating it if missing.
func (c *LeaseController) ensure(ctx context.Context) (*coordinationv1.Lease, bool, error) {
	lease, err := c.leases().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
	if err == nil {
		return lease, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("reading lease: %w", err)
	}
	fresh, err := c.newLease(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	lease, err = c.leases().Create(ctx, fresh, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("creating lease: %w", err)
	}
	c.renewedAt = c.clk.Now()
	c.log.Info("node lease created")
	return lease, true, nil
}

func (c *LeaseController) retryUpdate(ctx context.Context, base *coordinationv1.Lease) error {
	var errs []error
	for try := range c.cfg.Retries {
		next, err := c.newLease(ctx, base)
		if err == nil {
			var updated *coordinationv1.Lease
			updated, err = c.leases().Update(ctx, next, metav1.UpdateOptions{})
			if err == nil {
				c.latest = updated
				c.renewedAt = c.clk.Now()
				return nil
			}
			err = fmt.Errorf("updating lease: %w", err)
			if apierrors.IsConflict(err) {
				errs = append(errs, err)
				reread, _, ensureErr := c.ensure(ctx)
				if ensureErr != nil {
					return errors.Join(append(errs, ensureErr)...)
				}
				base = reread
				continue
			}
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		if try > 0 && c.cfg.OnRepeatedHeartbeatFailure != nil {
			c.cfg.OnRepeatedHeartbeatFailure()
		}
	}
	return fmt.Errorf("%w: %d tries: %w", ErrLeaseUpdate, c.cfg.Retries, errors.Join(errs...))
}

// renewTime is the renew time for a renewal of base: now, unless that is
// not after base's renew time (the clock went back, e.g. a device booting in
// 1970 before NTP, or base was written by a clock ahead of ours). A lease's
// renew time must grow with every renewal: the node lifecycle controller
// takes a renew time that is not after the one it saw as no renewal, and
// the node would go NotReady. Then the renewal is base's renew time plus
// the time since our last write (monotonic with the real clock), or plus
// RenewInterval when the clock cannot tell; it follows now again once the
// clock has caught up.
func (c *LeaseController) renewTime(base *coordinationv1.Lease) time.Time {
	now := c.clk.Now()
	if base == nil || base.Spec.RenewTime == nil || now.After(base.Spec.RenewTime.Time) {
		return now
	}
	step := c.cfg.RenewInterval
	if !c.renewedAt.IsZero() {
		if since := c.clk.Since(c.renewedAt); since > 0 && since <= time.Duration(c.cfg.DurationSeconds)*time.Second {
			step = since
		}
	}
	// MicroTime keeps microseconds: make sure the step survives.
	return base.Spec.RenewTime.Time.Add(max(step, time.Millisecond))
}

// newLease is base (or a new lease) renewed now, owned by the Node.
func (c *LeaseController) newLease(ctx context.Context, base *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	var lease *coordinationv1.Lease
	if base == nil {
		holder := c.cfg.NodeName
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: c.cfg.NodeName, Namespace: c.cfg.Namespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder},
		}
	} else {
		lease = base.DeepCopy()
	}
	d := c.cfg.DurationSeconds
	lease.Spec.LeaseDurationSeconds = &d
	lease.Spec.RenewTime = &metav1.MicroTime{Time: c.renewTime(base)}
	if len(lease.OwnerReferences) == 0 {
		node, err := c.cfg.Client.CoreV1().Nodes().Get(ctx, c.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node for the lease's owner reference: %w", err)
		}
		lease.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: leaseOwnerAPIVersion, Kind: leaseOwnerKind, Name: c.cfg.NodeName, UID: node.UID,
		}}
	}
	return lease, nil
}

// Run renews the lease every RenewInterval (with 4% jitter); after a failed
// renewal it tries again after RetryBackoff, doubling up to MaxRetryBackoff.
// It returns nil when ctx ends. The lease is left in place on return, so
// it expires. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (c *LeaseController) Run(ctx context.Context) error {
	if err := c.once.Start(); err != nil {
		return err
	}
	backoff := c.cfg.RetryBackoff
	for {
		next := c.cfg.RenewInterval + time.Duration(float64(c.cfg.RenewInterval)*renewJitter*c.cfg.Rand())
		if err := c.SyncOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(2*backoff, c.cfg.MaxRetryBackoff)
			c.log.Warn("node lease renewal failed, will retry", zap.Duration("backoff", backoff), zap.Error(err))
			next = backoff
		} else {
			backoff = c.cfg.RetryBackoff
		}
		t := c.clk.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}
