package fakestream

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of StreamConfig.
const (
	DefaultCreationTimeout = 30 * time.Second
	DefaultTokenTTL        = time.Minute
)

// PortForwarder handles one forwarded connection to port of the pod
// sandbox sandboxID: it reads what the client sends from conn and writes
// the answer to it, until the client closes its side (a read gives io.EOF)
// or ctx ends. An error is sent to the client on the connection's error
// stream.
type PortForwarder func(ctx context.Context, sandboxID string, port int32, conn io.ReadWriter) error

// Config configures a Server.
type Config struct {
	// Runtime is the fake whose Exec, Attach and PortForward hand out this
	// server's URLs (New makes the server its Streamer). Required.
	Runtime *fake.Runtime
	// Clock is the runtime's clock, on which URLs expire. Default real.
	Clock clock.PassiveClock
	// Listener is where the server listens (plain HTTP, as containerd's
	// streaming server on the node's loopback). Required; Run closes it.
	Listener net.Listener
	// PortForward handles forwarded connections; nil echoes every byte
	// back (a simulated echo server on every port).
	PortForward PortForwarder
	// StreamCreationTimeout bounds the real time a client may take to
	// open the streams of a session after the upgrade (default 30s, as the
	// kubelet's). It is network time, not the runtime's clock.
	StreamCreationTimeout time.Duration
	// TokenTTL is how long a URL handed out stays usable, on the runtime's
	// clock (default one minute, as the kubelet's). A URL works once.
	TokenTTL time.Duration
	// Logger defaults to zap.NewNop(); it is named "fakestream".
	Logger *zap.Logger
}

// Server serves the exec, attach and port-forward sessions of a
// fake Runtime over SPDY (the protocols kubectl and the API server speak to
// a kubelet: v4.channel.k8s.io and older, portforward.k8s.io) and, for exec
// and attach, over WebSocket (v5.channel.k8s.io, v4.channel.k8s.io and the
// unversioned channel.k8s.io). Create it with New and serve with Run.
type Server struct {
	rt      *fake.Runtime
	clock   clock.PassiveClock
	lis     net.Listener
	base    string
	forward PortForwarder
	timeout time.Duration
	ttl     time.Duration
	log     *zap.Logger
	once    lifecycle.Once

	mu       sync.Mutex
	requests map[string]*session
	closed   bool
	sessions sync.WaitGroup
}

// session is a request the runtime accepted, waiting for its client.
type session struct {
	fake.StreamRequest
	expires time.Time
}

// New validates cfg and makes the server cfg.Runtime's Streamer: from then
// on its Exec, Attach and PortForward return URLs of this server (served
// once Run runs; refused with Unavailable after Run returned). It starts
// nothing.
func New(cfg Config) (*Server, error) {
	var errs []error
	if cfg.Runtime == nil {
		errs = append(errs, fmt.Errorf("%w: Config.Runtime is required", fake.ErrInvalidConfig))
	}
	if cfg.Listener == nil {
		errs = append(errs, fmt.Errorf("%w: Config.Listener is required", fake.ErrInvalidConfig))
	}
	if cfg.StreamCreationTimeout < 0 || cfg.TokenTTL < 0 {
		errs = append(errs, fmt.Errorf("%w: Config timeouts must not be negative", fake.ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Server{
		rt:       cfg.Runtime,
		clock:    cfg.Clock,
		lis:      cfg.Listener,
		base:     "http://" + cfg.Listener.Addr().String(),
		forward:  cfg.PortForward,
		timeout:  cfg.StreamCreationTimeout,
		ttl:      cfg.TokenTTL,
		log:      cfg.Logger,
		requests: map[string]*session{},
	}
	if s.forward == nil {
		s.forward = echoForward
	}
	if s.timeout == 0 {
		s.timeout = DefaultCreationTimeout
	}
	if s.ttl == 0 {
		s.ttl = DefaultTokenTTL
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("fakestream")
	cfg.Runtime.SetStreamer(s)
	return s, nil
}

// URL is the server's base URL (http://host:port).
func (s *Server) URL() string { return s.base }

// Run serves until ctx ends, then closes the listener, ends every session
// and returns once all of them (and their goroutines) are gone. It follows
// the lifecycle contract: at most once, nil on a clean stop.
func (s *Server) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{token}", s.handle("exec"))
	mux.HandleFunc("/attach/{token}", s.handle("attach"))
	mux.HandleFunc("/portforward/{token}", s.handle("portforward"))
	srv := &http.Server{
		Handler:           mux,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: s.timeout,
		ErrorLog:          zap.NewStdLog(s.log),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.lis) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-served:
		err = fmt.Errorf("fakestream: %w", err)
	}
	cancel()
	_ = srv.Close()
	if err == nil {
		<-served
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.sessions.Wait()
	return err
}

// handle wraps a session handler: it refuses new sessions once Run is
// stopping and counts the running ones, so Run can wait for them.
func (s *Server) handle(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			http.Error(w, "stream server is stopping", http.StatusServiceUnavailable)
			return
		}
		s.sessions.Add(1)
		defer s.sessions.Done()
		sr := s.requests[req.PathValue("token")]
		delete(s.requests, req.PathValue("token"))
		s.mu.Unlock()
		if sr == nil || sr.Kind != kind || !s.clock.Now().Before(sr.expires) {
			http.Error(w, "unknown or expired stream token", http.StatusNotFound)
			return
		}
		switch kind {
		case fake.StreamPortForward:
			s.servePortForward(w, req, sr)
		default:
			s.serveRemoteCommand(w, req, sr)
		}
	}
}

// StreamURL stores a session the runtime accepted and returns its URL
// (fake.Streamer).
func (s *Server) StreamURL(req fake.StreamRequest) (string, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", status.Errorf(codes.Internal, "fakestream: token: %v", err)
	}
	token := base64.RawURLEncoding.EncodeToString(b[:])
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", unavailable{}
	}
	for t, old := range s.requests { // drop expired tokens
		if !now.Before(old.expires) {
			delete(s.requests, t)
		}
	}
	s.requests[token] = &session{StreamRequest: req, expires: now.Add(s.ttl)}
	return s.base + "/" + req.Kind + "/" + token, nil
}

// echoForward is the default PortForwarder: every byte comes back.
func echoForward(_ context.Context, _ string, _ int32, conn io.ReadWriter) error {
	_, err := io.Copy(conn, conn)
	return err
}
