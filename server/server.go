package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/server/healthz"
)

// Server is the agent's HTTPS API (the kubelet's port 10250) and its
// plain-HTTP localhost health port (10248).
type Server struct {
	cfg     Config
	log     *zap.Logger
	api     http.Handler
	healthz http.Handler
	health  healthz.Checks
	streams chan struct{}
	conns   connSet
	once    lifecycle.Once
}

// New checks cfg, fills its defaults and builds the handlers; it starts
// nothing and touches no file.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	s := &Server{cfg: cfg, log: cfg.Logger, streams: make(chan struct{}, cfg.MaxStreams),
		health: healthz.Checks{SyncLoop: cfg.SyncLoopHealthy, PLEG: cfg.PLEGHealthy, Extra: cfg.HealthChecks, Logger: cfg.Logger}}
	s.api = s.withAuth(s.routes())
	hz := http.NewServeMux()
	hz.HandleFunc("GET /healthz", s.health.ServeHealthz)
	s.healthz = hz
	return s, nil
}

// Handler returns the authenticated and authorized API handler (what Run
// serves with TLS).
func (s *Server) Handler() http.Handler { return s.api }

// HealthzHandler returns the handler of the plain-HTTP health port:
// /healthz only, without authentication.
func (s *Server) HealthzHandler() http.Handler { return s.healthz }

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	short := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, http.TimeoutHandler(h, s.cfg.RequestTimeout, "request timed out"))
	}
	short("GET /healthz", s.health.ServeHealthz)
	short("GET /healthz/{check}", s.health.ServeCheck)
	short("GET /pods", s.servePods)
	short("GET /runningpods/", s.serveRunningPods)
	short("GET /configz", s.serveConfigz)
	short("GET /metrics", s.serveMetrics)
	short("GET /metrics/probes", s.serveProbeMetrics)
	short("GET /metrics/resource", s.serveResourceMetrics)
	short("GET /stats/summary", s.serveSummary)
	short("POST /stats/summary", s.serveSummary)
	short("POST /run/{namespace}/{pod}/{container}", s.serveRun)
	short("POST /run/{namespace}/{pod}/{uid}/{container}", s.serveRun)
	// Logs with follow and the streams run as long as the client keeps
	// them: no request timeout.
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", s.serveContainerLogs)
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{container}", s.serveExec)
		mux.HandleFunc(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.serveExec)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{container}", s.serveAttach)
		mux.HandleFunc(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.serveAttach)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}", s.servePortForward)
		mux.HandleFunc(m+" /portForward/{namespace}/{pod}/{uid}", s.servePortForward)
	}
	return mux
}

// withAuth authenticates and authorizes every request as the kubelet:
// 401 without credentials it recognises (unless anonymous requests are
// allowed), 500 when the authorizer fails, 403 unless one of the request's
// checks is allowed.
func (s *Server) withAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var (
			u   *User
			ok  bool
			err error
		)
		if s.cfg.Authenticator != nil {
			u, ok, err = s.cfg.Authenticator.Authenticate(r)
		}
		switch {
		case err != nil:
			// The error may quote the credential's subject: it is logged
			// without the request's headers.
			s.log.Info("request not authenticated", zap.String("path", r.URL.Path), zap.Error(err))
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		case !ok && s.cfg.Anonymous:
			u, _, _ = Anonymous{}.Authenticate(r)
		case !ok:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := RequestAttributes(s.cfg.NodeName, u, r)
		subs := make([]string, 0, len(attrs))
		for _, a := range attrs {
			subs = append(subs, a.Subresource)
			d, _, err := s.cfg.Authorizer.Authorize(r.Context(), a)
			if err != nil {
				s.log.Error("authorization error", zap.String("user", u.Name), zap.String("verb", a.Verb),
					zap.String("subresource", a.Subresource), zap.Error(err))
				http.Error(w, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)",
					u.Name, a.Verb, a.Resource, a.Subresource), http.StatusInternalServerError)
				return
			}
			if d == DecisionAllow {
				next.ServeHTTP(w, r)
				return
			}
		}
		s.log.Debug("forbidden", zap.String("user", u.Name), zap.String("verb", attrs[0].Verb), zap.Strings("subresources", subs))
		http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource(s)=%v)",
			u.Name, attrs[0].Verb, attrs[0].Resource, subs), http.StatusForbidden)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func podList(pods []*v1.Pod) *v1.PodList {
	l := &v1.PodList{TypeMeta: podListType, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		l.Items = append(l.Items, *p)
	}
	return l
}

var podListType = metaTypeMeta("PodList")

func (s *Server) servePods(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, podList(s.cfg.Pods.Pods()))
}

// serveRunningPods lists the runtime's running pods as the kubelet does:
// name, namespace, UID and each container's name and image.
func (s *Server) serveRunningPods(w http.ResponseWriter, r *http.Request) {
	if s.cfg.RuntimePods == nil {
		http.Error(w, "runtime pods are not available", http.StatusNotImplemented)
		return
	}
	pods, err := s.cfg.RuntimePods.GetPods(r.Context(), false)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		api := &v1.Pod{}
		api.Name, api.Namespace, api.UID = p.Name, p.Namespace, p.ID
		for _, c := range p.Containers {
			api.Spec.Containers = append(api.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
		}
		out = append(out, api)
	}
	writeJSON(w, podList(out))
}

func (s *Server) serveConfigz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Configz == nil {
		http.NotFound(w, r)
		return
	}
	v, err := s.cfg.Configz()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, map[string]any{"kubeletconfig": v})
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		http.NotFound(w, r)
		return
	}
	promhttp.HandlerFor(s.cfg.Metrics, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// probeFamilies keeps the prober's families of a registry.
type probeFamilies struct{ g prometheus.Gatherer }

func (p probeFamilies) Gather() ([]*dto.MetricFamily, error) {
	all, err := p.g.Gather()
	out := all[:0]
	for _, f := range all {
		if strings.HasPrefix(f.GetName(), "prober_probe_") || f.GetName() == "process_start_time_seconds" {
			out = append(out, f)
		}
	}
	return out, err
}

func (s *Server) serveProbeMetrics(w http.ResponseWriter, r *http.Request) {
	g := s.cfg.ProbeMetrics
	if g == nil && s.cfg.Metrics != nil {
		g = probeFamilies{s.cfg.Metrics}
	}
	if g == nil {
		http.NotFound(w, r)
		return
	}
	promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

func (s *Server) serveResourceMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.ResourceMetrics == nil {
		http.Error(w, "resource metrics are not available", http.StatusNotFound)
		return
	}
	col := s.cfg.ResourceMetrics
	if cc, ok := col.(contextCollector); ok {
		col = requestCollector{Collector: col, cc: cc, ctx: r.Context()}
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// contextCollector is a collector that can collect under a context
// (stats.ResourceCollector): the server gives it the request's.
type contextCollector interface {
	CollectContext(ctx context.Context, ch chan<- prometheus.Metric)
}

// requestCollector collects a contextCollector under one request's context.
type requestCollector struct {
	prometheus.Collector
	cc  contextCollector
	ctx context.Context
}

func (c requestCollector) Collect(ch chan<- prometheus.Metric) { c.cc.CollectContext(c.ctx, ch) }

// serveSummary serves the stats summary; only_cpu_and_memory=true keeps
// CPU and memory only (the kubelet reads it from the query or a POSTed
// JSON body).
func (s *Server) serveSummary(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Stats == nil {
		http.Error(w, "stats are not available", http.StatusNotFound)
		return
	}
	only := false
	if v := r.URL.Query().Get("only_cpu_and_memory"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			http.Error(w, fmt.Sprintf("invalid only_cpu_and_memory %q", v), http.StatusBadRequest)
			return
		}
		only = b
	}
	sum, err := s.cfg.Stats.Summary(r.Context(), only)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, sum)
}

// Run serves the API with TLS on Address:Port and, when HealthzPort is
// set, /healthz on HealthzAddress:HealthzPort, until ctx ends; then it
// shuts both down, closes the open streams and returns nil. The API
// listener or serving pair failing is an error; the health listener
// failing is logged and retried every 5 s, as the kubelet does, so a busy
// health port does not stop the agent. See package lifecycle for the
// contract.
func (s *Server) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	tlsCfg, err := s.TLSConfig()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(s.cfg.Address, strconv.Itoa(s.cfg.Port)))
	if err != nil {
		return fmt.Errorf("server: listening: %w", err)
	}
	var hz func() (net.Listener, error)
	if s.cfg.HealthzPort != 0 {
		addr := net.JoinHostPort(s.cfg.HealthzAddress, strconv.Itoa(s.cfg.HealthzPort))
		hz = func() (net.Listener, error) { return net.Listen("tcp", addr) }
	}
	return s.serve(ctx, tls.NewListener(ln, tlsCfg), hz)
}

// Serve serves the API on ln (which must already speak TLS for client
// certificates to be seen) and, when hz is not nil, /healthz on hz, until
// ctx ends.
func (s *Server) Serve(ctx context.Context, ln, hz net.Listener) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	var listenHz func() (net.Listener, error)
	if hz != nil {
		listenHz = func() (net.Listener, error) { return hz, nil }
	}
	return s.serve(ctx, ln, listenHz)
}

func (s *Server) serve(ctx context.Context, ln net.Listener, listenHz func() (net.Listener, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	api := &http.Server{Handler: s.api, ReadHeaderTimeout: 30 * time.Second, ErrorLog: zap.NewStdLog(s.log)}
	var (
		wg     sync.WaitGroup
		apiErr error
	)
	wg.Go(func() {
		if err := api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			apiErr = err
			cancel()
		}
	})
	if listenHz != nil {
		wg.Go(func() { healthz.Serve(ctx, s.healthz, listenHz, s.cfg.Clock, s.log) })
	}
	<-ctx.Done()
	_ = api.Close()
	s.closeStreams()
	wg.Wait()
	if apiErr != nil {
		return fmt.Errorf("server: serving: %w", apiErr)
	}
	return nil
}
