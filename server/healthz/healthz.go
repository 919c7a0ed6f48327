package healthz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// DefaultPort is the kubelet's health port.
const DefaultPort = 10248

// Retry is how long the health port waits before listening again.
const Retry = 5 * time.Second

// ErrInvalidConfig: a Config field is invalid; the wrapping error names it.
var ErrInvalidConfig = errors.New("healthz: invalid config")

// Check is one named /healthz check.
type Check struct {
	Name  string
	Check func() error
}

// Checks are the /healthz checks: ping and log, then the sync loop's, the
// PLEG's and Extra, in that order.
type Checks struct {
	SyncLoop func() error
	PLEG     func() (bool, error)
	Extra    []Check
	// Logger gets the reasons of failed checks (never served).
	Logger *zap.Logger
}

func (h Checks) list() []Check {
	out := []Check{{"ping", func() error { return nil }}, {"log", func() error { return nil }}}
	if f := h.SyncLoop; f != nil {
		out = append(out, Check{"syncloop", f})
	}
	if f := h.PLEG; f != nil {
		out = append(out, Check{"pleg", func() error {
			ok, err := f()
			if ok {
				return nil
			}
			if err == nil {
				err = errors.New("PLEG is not healthy")
			}
			return err
		}})
	}
	return append(out, h.Extra...)
}

func (h Checks) log() *zap.Logger {
	if h.Logger == nil {
		return zap.NewNop()
	}
	return h.Logger
}

// ServeHealthz runs every check: "ok", or 500 listing them with the
// reasons withheld; ?verbose lists them on success too; ?exclude=name
// skips one.
func (h Checks) ServeHealthz(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	excluded := q["exclude"]
	var b strings.Builder
	failed := false
	for _, c := range h.list() {
		if slices.Contains(excluded, c.Name) {
			fmt.Fprintf(&b, "[+]%s excluded: ok\n", c.Name)
			continue
		}
		if err := c.Check(); err != nil {
			h.log().Info("health check failed", zap.String("check", c.Name), zap.Error(err))
			fmt.Fprintf(&b, "[-]%s failed: reason withheld\n", c.Name)
			failed = true
			continue
		}
		fmt.Fprintf(&b, "[+]%s ok\n", c.Name)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		http.Error(w, b.String()+"healthz check failed", http.StatusInternalServerError)
		return
	}
	if _, verbose := q["verbose"]; verbose {
		fmt.Fprint(w, b.String()+"healthz check passed\n")
		return
	}
	fmt.Fprint(w, "ok")
}

// ServeCheck runs the check the path value "check" names (404 if none).
func (h Checks) ServeCheck(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("check")
	for _, c := range h.list() {
		if c.Name != name {
			continue
		}
		if err := c.Check(); err != nil {
			http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "ok")
		return
	}
	http.NotFound(w, r)
}

// Serve serves handler until ctx ends, listening again after Retry (on
// clk) whenever listening or serving fails, as the kubelet's health port.
func Serve(ctx context.Context, handler http.Handler, listen func() (net.Listener, error), clk clock.WithTicker, log *zap.Logger) {
	for ctx.Err() == nil {
		ln, err := listen()
		if err == nil {
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
				WriteTimeout: 30 * time.Second, ErrorLog: zap.NewStdLog(log)}
			stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
			err = srv.Serve(ln)
			stop()
			if ctx.Err() != nil {
				return
			}
		}
		log.Warn("health port failed; trying again", zap.Duration("after", Retry), zap.Error(err))
		t := clk.NewTimer(Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// Config configures a Server: the plain-HTTP health port alone, for an
// agent that serves no API (it then links none of the API's code).
type Config struct {
	// Address and Port: default 127.0.0.1 and DefaultPort.
	Address string
	Port    int
	Checks  Checks
	Clock   clock.WithTicker
	Logger  *zap.Logger
}

// Server serves /healthz on the health port.
type Server struct {
	cfg     Config
	handler http.Handler
	once    lifecycle.Once
}

// New checks cfg and builds the handler; it starts nothing.
func New(cfg Config) (*Server, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("%w: Port %d out of range", ErrInvalidConfig, cfg.Port)
	}
	for _, c := range cfg.Checks.Extra {
		if c.Name == "" || c.Check == nil {
			return nil, fmt.Errorf("%w: Checks.Extra: a check needs a name and a func", ErrInvalidConfig)
		}
	}
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Logger = cfg.Logger.Named("healthz")
	if cfg.Checks.Logger == nil {
		cfg.Checks.Logger = cfg.Logger
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", cfg.Checks.ServeHealthz)
	return &Server{cfg: cfg, handler: mux}, nil
}

// Handler returns the /healthz handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Run serves /healthz until ctx ends and returns nil; a port that cannot
// be opened is logged and tried again every Retry. See package lifecycle
// for the contract.
func (s *Server) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	addr := net.JoinHostPort(s.cfg.Address, strconv.Itoa(s.cfg.Port))
	Serve(ctx, s.handler, func() (net.Listener, error) { return net.Listen("tcp", addr) }, s.cfg.Clock, s.cfg.Logger)
	return nil
}
