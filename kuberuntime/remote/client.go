package remote

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Defaults for the zero fields of Config.
const (
	DefaultConnectTimeout = 2 * time.Second
	DefaultCallTimeout    = 2 * time.Minute
	DefaultListTimeout    = 10 * time.Second
	DefaultPullTimeout    = 10 * time.Minute
	DefaultMaxMsgSize     = 16 << 20
)

// Reconnect back-off: start fast (a restarted runtime is usually back within
// a second) and never wait more than a few seconds between attempts.
const (
	reconnectBaseDelay = 100 * time.Millisecond
	reconnectMaxDelay  = 3 * time.Second
)

// maxUnixPath is the longest socket path Linux accepts (sun_path is 108
// bytes including the terminating NUL).
const maxUnixPath = 107

// Config configures a Client. Only Endpoint is required.
type Config struct {
	// Endpoint is the runtime's CRI socket: "unix:///run/containerd/containerd.sock"
	// or the plain absolute path "/run/containerd/containerd.sock".
	// Other schemes (tcp://, npipe://) and relative paths are rejected.
	Endpoint string

	// ConnectTimeout bounds Connect (the CRI v1 check) and each attempt to
	// establish the connection. Default 2s.
	ConnectTimeout time.Duration
	// CallTimeout is the deadline of every call not listed below (the
	// kubelet's runtime-request-timeout). Default 2m. RunPodSandbox gets
	// twice this (it may pull the sandbox image); StopContainer gets this
	// plus its stop timeout; ExecSync this plus its exec timeout;
	// CheckpointContainer this plus its requested timeout.
	CallTimeout time.Duration
	// ListTimeout is the deadline of the read-only calls: Version, Status,
	// RuntimeConfig, List*, *Status, *Stats, ListMetricDescriptors,
	// ListPodSandboxMetrics, ListImages, ImageStatus, ImageFsInfo.
	// Default 10s.
	ListTimeout time.Duration
	// PullTimeout is the deadline of PullImage. Default 10m.
	PullTimeout time.Duration
	// MaxMsgSize caps the size of one request or response in bytes.
	// Default 16 MiB (the kubelet's limit).
	MaxMsgSize int

	// Logger receives debug logs of failed calls. Default zap.NewNop().
	Logger *zap.Logger
	// Clock times calls for the logs. Default clock.RealClock{}.
	Clock clock.PassiveClock
}

// Client is a CRI v1 client over a unix socket. It satisfies cri-api's
// RuntimeService and ImageManagerService. It is safe for concurrent use.
//
// Every method applies its own deadline (see Config); a shorter deadline on
// the caller's ctx wins. Failed calls return a *StatusError that wraps the
// sentinel for its gRPC code (ErrNotFound, ErrUnavailable, ...).
type Client struct {
	cfg    Config
	path   string
	target string
	log    *zap.Logger
	clock  clock.PassiveClock

	mu     sync.Mutex
	conn   *grpc.ClientConn
	rt     runtimeapi.RuntimeServiceClient
	img    runtimeapi.ImageServiceClient
	closed bool
}

var (
	_ cri.RuntimeService      = (*Client)(nil)
	_ cri.ImageManagerService = (*Client)(nil)
)

// New validates cfg and fills its defaults. It does no I/O: the connection
// is made by the first call (or by Connect).
func New(cfg Config) (*Client, error) {
	var errs []error
	path, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		errs = append(errs, err)
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ConnectTimeout", &cfg.ConnectTimeout, DefaultConnectTimeout},
		{"CallTimeout", &cfg.CallTimeout, DefaultCallTimeout},
		{"ListTimeout", &cfg.ListTimeout, DefaultListTimeout},
		{"PullTimeout", &cfg.PullTimeout, DefaultPullTimeout},
	}
	for _, d := range durations {
		if *d.v < 0 {
			errs = append(errs, fmt.Errorf("%w: %s %v is negative", ErrInvalidConfig, d.name, *d.v))
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if cfg.MaxMsgSize < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxMsgSize %d is negative", ErrInvalidConfig, cfg.MaxMsgSize))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.MaxMsgSize == 0 {
		cfg.MaxMsgSize = DefaultMaxMsgSize
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Client{
		cfg:    cfg,
		path:   path,
		target: "unix://" + path,
		log:    cfg.Logger.Named("remote"),
		clock:  cfg.Clock,
	}, nil
}

// parseEndpoint returns the absolute socket path of a unix endpoint.
func parseEndpoint(ep string) (string, error) {
	if ep == "" {
		return "", fmt.Errorf("%w: Endpoint is empty (want unix:///path/to/socket or an absolute path)", ErrInvalidEndpoint)
	}
	p := ep
	if rest, ok := strings.CutPrefix(ep, "unix://"); ok {
		p = rest
	} else if i := strings.Index(ep, "://"); i >= 0 {
		return "", fmt.Errorf("%w: Endpoint %q: scheme %q is not supported (want unix:///path/to/socket or an absolute path)",
			ErrInvalidEndpoint, ep, ep[:i])
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%w: Endpoint %q contains a NUL byte", ErrInvalidEndpoint, ep)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: Endpoint %q: socket path %q is not absolute", ErrInvalidEndpoint, ep, p)
	}
	p = filepath.Clean(p)
	if len(p) > maxUnixPath {
		return "", fmt.Errorf("%w: Endpoint %q: socket path is %d bytes, longer than the %d a unix socket allows",
			ErrInvalidEndpoint, ep, len(p), maxUnixPath)
	}
	return p, nil
}

// Endpoint is the normalised endpoint, "unix:///path".
func (c *Client) Endpoint() string { return c.target }

// stubs returns the generated clients, creating the connection on first use.
func (c *Client) stubs(method, id string) (runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, nil, closedError(method, id)
	}
	if c.conn == nil {
		params := grpc.ConnectParams{
			Backoff:           backoff.DefaultConfig,
			MinConnectTimeout: c.cfg.ConnectTimeout,
		}
		params.Backoff.BaseDelay = reconnectBaseDelay
		params.Backoff.MaxDelay = reconnectMaxDelay
		conn, err := grpc.NewClient(c.target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithConnectParams(params),
			grpc.WithDefaultCallOptions(
				grpc.MaxCallRecvMsgSize(c.cfg.MaxMsgSize),
				grpc.MaxCallSendMsgSize(c.cfg.MaxMsgSize),
			),
		)
		if err != nil {
			return nil, nil, &callError{
				msg:  fmt.Sprintf("%s: create gRPC client for %s: %v", prefix(method, id), c.target, err),
				errs: []error{ErrInvalidEndpoint, err},
			}
		}
		c.conn = conn
		c.rt = runtimeapi.NewRuntimeServiceClient(conn)
		c.img = runtimeapi.NewImageServiceClient(conn)
	}
	return c.rt, c.img, nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// failed turns the error of a call into the error the method returns.
func (c *Client) failed(method, id string, start time.Time, err error) error {
	code := status.Code(err)
	if (code == codes.Canceled || code == codes.Unavailable) && c.isClosed() {
		return closedError(method, id)
	}
	se := newStatusError(method, id, err)
	if se.Code == codes.ResourceExhausted {
		se.Detail = fmt.Sprintf("the client's MaxMsgSize is %d bytes", c.cfg.MaxMsgSize)
	}
	if ce := c.log.Check(zap.DebugLevel, "CRI call failed"); ce != nil {
		ce.Write(zap.String("method", method), zap.String("id", id),
			zap.Stringer("code", se.Code), zap.String("message", se.Message),
			zap.Duration("took", c.clock.Since(start)))
	}
	return se
}

// invoke runs one unary call under timeout.
func invoke[Resp any](ctx context.Context, c *Client, method, id string, timeout time.Duration,
	do func(context.Context, runtimeapi.RuntimeServiceClient, runtimeapi.ImageServiceClient) (Resp, error),
) (Resp, error) {
	var zero Resp
	rt, img, err := c.stubs(method, id)
	if err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := c.clock.Now()
	resp, err := do(ctx, rt, img)
	if err != nil {
		return zero, c.failed(method, id, start, err)
	}
	return resp, nil
}

// plusSeconds is base + secs seconds, clamped to the largest Duration and
// treating negative secs as 0.
func plusSeconds(base time.Duration, secs int64) time.Duration {
	if secs <= 0 {
		return base
	}
	if secs > int64((math.MaxInt64-base)/time.Second) {
		return math.MaxInt64
	}
	return base + time.Duration(secs)*time.Second
}

// Connect checks that the endpoint serves the CRI v1 RuntimeService by
// calling Version("v1") within ConnectTimeout (or ctx's deadline, if
// sooner). It returns nil if the runtime answered; an error wrapping
// ErrUnsupportedAPI if the runtime answered Unimplemented (no v1 service,
// e.g. a v1alpha2-only runtime); an error wrapping ErrUnavailable if the
// endpoint could not be reached in time. Connect is optional: every method
// connects on first use. It may be called again, e.g. to wait for a
// restarted runtime.
func (c *Client) Connect(ctx context.Context) error {
	rt, _, err := c.stubs("Connect", "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	start := c.clock.Now()
	resp, err := rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
	if err != nil {
		ferr := c.failed("Version", "", start, err)
		switch status.Code(err) {
		case codes.Unimplemented:
			return &callError{
				msg:  fmt.Sprintf("remote: endpoint %s does not serve the CRI v1 runtime API: %v", c.target, ferr),
				errs: []error{ErrUnsupportedAPI, ferr},
			}
		case codes.Unavailable:
			return &callError{
				msg:  fmt.Sprintf("remote: can't reach CRI endpoint %s: %v", c.target, ferr),
				errs: []error{ferr},
			}
		case codes.DeadlineExceeded:
			return &callError{
				msg:  fmt.Sprintf("remote: CRI endpoint %s did not answer Version within %v: %v", c.target, c.cfg.ConnectTimeout, ferr),
				errs: []error{ErrUnavailable, ferr},
			}
		default:
			return &callError{
				msg:  fmt.Sprintf("remote: connect to CRI endpoint %s: %v", c.target, ferr),
				errs: []error{ferr},
			}
		}
	}
	c.log.Debug("connected to CRI runtime", zap.String("endpoint", c.target),
		zap.String("runtime", resp.GetRuntimeName()), zap.String("runtimeVersion", resp.GetRuntimeVersion()),
		zap.String("apiVersion", resp.GetRuntimeApiVersion()))
	return nil
}

// Close closes the connection. In-flight calls and every later call fail
// with an error wrapping ErrClosed. Closing twice is harmless.
func (c *Client) Close(_ context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn, c.rt, c.img = nil, nil, nil
	if err != nil {
		return fmt.Errorf("remote: close connection to %s: %w", c.target, err)
	}
	return nil
}
