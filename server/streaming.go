package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

// StreamOptions are the streams an exec or attach request asks for.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
}

// WebSocketStreams translates the WebSocket protocols a client (or the API
// server) may speak to the runtime's SPDY streaming server: exec and attach
// over the v5 channel protocol, and port-forward tunnelling SPDY over a
// WebSocket. server/apiserver implements it with k8s.io/apiserver's
// translators.
type WebSocketStreams interface {
	StreamTranslator(target *url.URL, opts StreamOptions) http.Handler
	Tunneling(upstream http.Handler) http.Handler
}

// streamOptions parses the exec and attach stream flags as the kubelet:
// input, output, error and tty, each on when "1"; a TTY merges stderr into stdout;
// at least one stream is required.
func streamOptions(r *http.Request) (StreamOptions, error) {
	q := r.URL.Query()
	o := StreamOptions{Stdin: q.Get("input") == "1", Stdout: q.Get("output") == "1",
		Stderr: q.Get("error") == "1", TTY: q.Get("tty") == "1"}
	if o.TTY && o.Stderr {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, fmt.Errorf("%w: you must specify at least 1 of stdin, stdout, stderr", ErrBadRequest)
	}
	return o, nil
}

// portForwardPorts parses the port parameters of a WebSocket port-forward
// (SPDY clients name ports per stream): each a port from 1 to 65535.
func portForwardPorts(r *http.Request) ([]int32, error) {
	if !wsstream.IsWebSocketRequest(r) {
		return nil, nil
	}
	var ports []int32
	for _, v := range r.URL.Query()["port"] {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil || n == 0 {
				return nil, fmt.Errorf("%w: invalid port %q", ErrBadRequest, p)
			}
			ports = append(ports, int32(n))
		}
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("%w: at least 1 port must be specified", ErrBadRequest)
	}
	return ports, nil
}

// findPod returns the agent's pod namespace/name, as the kubelet's pod
// manager finds it.
func (s *Server) findPod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range s.cfg.Pods.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// runningPod returns the runtime's running pod of namespace/name (and uid
// when given).
func (s *Server) runningPod(ctx context.Context, namespace, name string, uid types.UID) (*kubetypes.Pod, error) {
	pods, err := s.cfg.RuntimePods.GetPods(ctx, false)
	if err != nil {
		return nil, err
	}
	for _, p := range pods {
		if p.Namespace == namespace && p.Name == name && (uid == "" || p.ID == uid) {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: pod not found (%q)", ErrNotFound, name+"_"+namespace)
}

// findContainer returns the ID of the running container of a pod.
func (s *Server) findContainer(ctx context.Context, namespace, name string, uid types.UID, container string) (string, error) {
	p, err := s.runningPod(ctx, namespace, name, uid)
	if err != nil {
		return "", err
	}
	for _, c := range p.Containers {
		if c.Name == container {
			return c.ID, nil
		}
	}
	return "", fmt.Errorf("%w: container not found (%q)", ErrNotFound, container)
}

// pathPod reads and checks the pod part of a stream or run path; it
// writes the refusal and returns false when the request cannot go on.
func (s *Server) pathPod(w http.ResponseWriter, r *http.Request, withContainer bool) (*v1.Pod, types.UID, string, bool) {
	ns, name, uid, container := r.PathValue("namespace"), r.PathValue("pod"), types.UID(r.PathValue("uid")), r.PathValue("container")
	if err := checkNames(ns, name, container, withContainer); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, "", "", false
	}
	pod, ok := s.findPod(ns, name)
	if !ok {
		http.Error(w, "pod does not exist", http.StatusNotFound)
		return nil, "", "", false
	}
	if uid != "" && pod.UID != uid {
		http.Error(w, "pod not found", http.StatusNotFound)
		return nil, "", "", false
	}
	return pod, uid, container, true
}

// writeStreamError answers a failure to prepare a stream: 404 for what is
// not there, 400 for a bad request, the runtime's gRPC code mapped
// otherwise.
func writeStreamError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrNotFound):
		code = http.StatusNotFound
	case errors.Is(err, ErrBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		code = http.StatusGatewayTimeout
	default:
		if st, ok := status.FromError(err); ok {
			switch st.Code() {
			case codes.NotFound:
				code = http.StatusNotFound
			case codes.InvalidArgument:
				code = http.StatusBadRequest
			case codes.ResourceExhausted:
				code = http.StatusTooManyRequests
			case codes.Unimplemented:
				code = http.StatusNotImplemented
			case codes.DeadlineExceeded:
				code = http.StatusGatewayTimeout
			}
		}
	}
	http.Error(w, err.Error(), code)
}

func (s *Server) serveExec(w http.ResponseWriter, r *http.Request) { s.serveStream(w, r, "exec") }

func (s *Server) serveAttach(w http.ResponseWriter, r *http.Request) { s.serveStream(w, r, "attach") }

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, kind string) {
	if s.cfg.Streaming == nil || s.cfg.RuntimePods == nil {
		http.Error(w, kind+" is not available", http.StatusNotImplemented)
		return
	}
	opts, err := streamOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()["command"]
	if kind == "exec" && len(cmd) == 0 {
		http.Error(w, "no command given", http.StatusBadRequest)
		return
	}
	pod, uid, container, ok := s.pathPod(w, r, true)
	if !ok {
		return
	}
	release, ok := s.acquireStream(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StreamCreationTimeout)
	defer cancel()
	id, err := s.findContainer(ctx, pod.Namespace, pod.Name, uid, container)
	if err != nil {
		writeStreamError(w, err)
		return
	}
	var raw string
	if kind == "exec" {
		resp, err := s.cfg.Streaming.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
			Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
		if err != nil {
			writeStreamError(w, err)
			return
		}
		raw = resp.GetUrl()
	} else {
		resp, err := s.cfg.Streaming.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id,
			Tty: opts.TTY, Stdin: opts.Stdin, Stdout: opts.Stdout, Stderr: opts.Stderr})
		if err != nil {
			writeStreamError(w, err)
			return
		}
		raw = resp.GetUrl()
	}
	target, err := url.Parse(raw)
	if err != nil {
		writeStreamError(w, fmt.Errorf("runtime returned a bad streaming URL: %w", err))
		return
	}
	var h http.Handler = s.upgradeProxy(target)
	if s.cfg.WebSocketStreams != nil && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		h = s.cfg.WebSocketStreams.StreamTranslator(target, opts)
	}
	h.ServeHTTP(s.idleWriter(w), r)
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Streaming == nil || s.cfg.RuntimePods == nil {
		http.Error(w, "port-forward is not available", http.StatusNotImplemented)
		return
	}
	tunnel := s.cfg.WebSocketStreams != nil && wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	var ports []int32
	if !tunnel {
		var err error
		if ports, err = portForwardPorts(r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	pod, _, _, ok := s.pathPod(w, r, false)
	if !ok {
		return
	}
	release, ok := s.acquireStream(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.StreamCreationTimeout)
	defer cancel()
	rp, err := s.runningPod(ctx, pod.Namespace, pod.Name, pod.UID)
	if err == nil && len(rp.Sandboxes) == 0 {
		err = fmt.Errorf("%w: no sandbox of pod %q", ErrNotFound, pod.Name)
	}
	if err != nil {
		writeStreamError(w, err)
		return
	}
	resp, err := s.cfg.Streaming.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: rp.Sandboxes[0].ID, Port: ports})
	if err != nil {
		writeStreamError(w, err)
		return
	}
	target, err := url.Parse(resp.GetUrl())
	if err != nil {
		writeStreamError(w, fmt.Errorf("runtime returned a bad streaming URL: %w", err))
		return
	}
	var h http.Handler = s.upgradeProxy(target)
	if tunnel {
		h = s.cfg.WebSocketStreams.Tunneling(h)
	}
	h.ServeHTTP(s.idleWriter(w), r)
}

// serveRun runs cmd (split on spaces, as the kubelet's /run) in the
// container and returns its stdout then stderr.
func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Runner == nil || s.cfg.RuntimePods == nil {
		http.Error(w, "run is not available", http.StatusNotImplemented)
		return
	}
	pod, uid, container, ok := s.pathPod(w, r, true)
	if !ok {
		return
	}
	cmd := strings.Split(r.URL.Query().Get("cmd"), " ")
	id, err := s.findContainer(r.Context(), pod.Namespace, pod.Name, uid, container)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	stdout, stderr, err := s.cfg.Runner.ExecSync(r.Context(), id, cmd, 0)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(stdout, stderr...))
}

type errorResponder struct{ log *zap.Logger }

func (e errorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	e.log.Info("proxying a stream failed", zap.Error(err))
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// upgradeProxy proxies an upgrading request to the runtime's streaming
// server, reaching it within the stream creation timeout.
func (s *Server) upgradeProxy(target *url.URL) http.Handler {
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: s.cfg.StreamCreationTimeout}).DialContext,
		TLSHandshakeTimeout: s.cfg.StreamCreationTimeout}
	h := proxy.NewUpgradeAwareHandler(target, tr, false, true, errorResponder{s.log})
	return h
}

// acquireStream takes one of MaxStreams slots, or answers 429.
func (s *Server) acquireStream(w http.ResponseWriter) (func(), bool) {
	select {
	case s.streams <- struct{}{}:
		return func() { <-s.streams }, true
	default:
		http.Error(w, ErrTooManyStreams.Error(), http.StatusTooManyRequests)
		return nil, false
	}
}

// idleWriter makes the connection a proxied stream hijacks close after
// StreamingIdleTimeout without traffic either way, and registers it so
// that Run's end closes it.
func (s *Server) idleWriter(w http.ResponseWriter) http.ResponseWriter {
	return &idleResponseWriter{ResponseWriter: w, s: s}
}

type idleResponseWriter struct {
	http.ResponseWriter
	s *Server
}

func (w *idleResponseWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("server: connection cannot be hijacked")
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	return w.s.track(newIdleConn(conn, w.s.cfg.Clock, w.s.cfg.StreamingIdleTimeout)), rw, nil
}

func (w *idleResponseWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// idleConn closes its connection after timeout without a read or a
// write. The timer's func only closes the connection: a fake clock runs it
// under its own lock, so it must not call back into the timer.
type idleConn struct {
	net.Conn
	timeout time.Duration
	timer   clock.Timer
	closed  atomic.Bool
}

func newIdleConn(c net.Conn, clk clock.WithTicker, timeout time.Duration) *idleConn {
	ic := &idleConn{Conn: c, timeout: timeout}
	expire := func() { ic.closed.Store(true); _ = ic.Conn.Close() }
	if d, ok := clk.(clock.WithDelayedExecution); ok {
		ic.timer = d.AfterFunc(timeout, expire)
	} else {
		ic.timer = clock.RealClock{}.AfterFunc(timeout, expire)
	}
	return ic
}

func (c *idleConn) touch() {
	if !c.closed.Load() {
		c.timer.Reset(c.timeout)
	}
}

func (c *idleConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) Close() error {
	c.closed.Store(true)
	c.timer.Stop()
	return c.Conn.Close()
}

// connSet holds the hijacked stream connections, closed when Run ends.
type connSet struct {
	mu    sync.Mutex
	conns map[*trackedConn]struct{}
	done  bool
}

type trackedConn struct {
	net.Conn
	set  *connSet
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.set.mu.Lock()
		delete(c.set.conns, c)
		c.set.mu.Unlock()
	})
	return c.Conn.Close()
}

func (s *Server) track(c net.Conn) net.Conn {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	if s.conns.done {
		_ = c.Close()
		return c
	}
	if s.conns.conns == nil {
		s.conns.conns = map[*trackedConn]struct{}{}
	}
	tc := &trackedConn{Conn: c, set: &s.conns}
	s.conns.conns[tc] = struct{}{}
	return tc
}

func (s *Server) closeStreams() {
	s.conns.mu.Lock()
	s.conns.done = true
	conns := make([]*trackedConn, 0, len(s.conns.conns))
	for c := range s.conns.conns {
		conns = append(conns, c)
	}
	s.conns.mu.Unlock()
	for _, c := range conns {
		_ = c.Conn.Close()
	}
}
