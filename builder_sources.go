package nodekit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

// The pod sources podconfig has, each one Builder call away: a manifest
// directory (WithManifestDir), a manifest URL (WithManifestURL, the
// kubelet's --manifest-url), HTTP pushes (WithPushSource), the API server
// (WithCluster) and any other (WithPodSource).

// WithManifestURL runs the static pods served at url (a Pod or a PodList,
// YAML or JSON), fetched every 20 seconds with header on each request, as
// the kubelet's --manifest-url and --manifest-url-header
// (podconfig.HTTPSource, source name "http"). Build checks the URL and the
// header; nothing is fetched before Run. Credentials in the URL or the
// header are never logged.
func (b *Builder) WithManifestURL(url string, header http.Header) *Builder {
	header = header.Clone()
	b.sources = append(b.sources, namedSource{name: kubetypes.SourceHTTP, build: func(bd *build, out chan<- kubetypes.PodUpdate) (PodSource, error) {
		return podconfig.NewHTTPSource(podconfig.HTTPSourceConfig{
			URL: url, Header: header, NodeName: bd.b.nodeName, Period: bd.b.urlPeriod,
			Clock: bd.clk, Logger: bd.log, Out: out,
			OnError: bd.sourceError(kubetypes.SourceHTTP),
		})
	}})
	return b
}

// WithManifestPeriods sets how often the manifest directory
// (WithManifestDir) and the manifest URL (WithManifestURL) are read again
// in full: the kubelet's fileCheckFrequency and httpCheckFrequency. 0
// keeps podconfig's default (20 s each); file system events still make
// the directory's changes seen at once.
func (b *Builder) WithManifestPeriods(dir, url time.Duration) *Builder {
	b.filePeriod, b.urlPeriod = dir, url
	return b
}

// WithPushSource takes static pods pushed over HTTP (podconfig.PushHandler,
// source name "push"): POST or PUT a Pod or PodList, DELETE
// /<namespace>/<name>, GET the current set. With a non-empty addr
// ("127.0.0.1:10260") the agent serves the handler there while it runs (a
// listen failure stops the agent, naming the part); with "" it serves
// nothing and the program mounts Agent.PushHandler on a server of its own.
// The handler has no authentication: listen on loopback, or put it behind
// a server that authenticates.
func (b *Builder) WithPushSource(addr string) *Builder {
	b.sources = append(b.sources, namedSource{name: kubetypes.SourcePush, build: func(bd *build, out chan<- kubetypes.PodUpdate) (PodSource, error) {
		if addr != "" {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return nil, fmt.Errorf("listen address %q: %w", addr, err)
			}
		}
		h, err := podconfig.NewPushHandler(podconfig.PushConfig{
			NodeName: bd.b.nodeName, Out: out, Clock: bd.clk, Logger: bd.log,
		})
		if err != nil {
			return nil, err
		}
		bd.a.push = h
		if addr == "" {
			return h, nil
		}
		return &pushServer{h: h, addr: addr, log: bd.log}, nil
	}})
	return b
}

// WithSourceErrors has f called with what a pod source refuses: a manifest
// that does not parse or validate (the error names the file and the line or
// field; once per distinct broken content, after a recheck for a manifest
// caught mid-write), a manifest URL that cannot be fetched or decoded (once
// per distinct error until it works again). source is the source's name
// ("file", "http"). The source has also logged it, once, at warn level.
// f is called from the source's goroutine and must not block.
func (b *Builder) WithSourceErrors(f func(source string, err error)) *Builder {
	b.sourceErrors = f
	return b
}

// sourceError returns the error callback of the named source: the one
// given to WithSourceErrors, or nil.
func (bd *build) sourceError(source string) func(error) {
	f := bd.b.sourceErrors
	if f == nil {
		return nil
	}
	return func(err error) { f(source, err) }
}

// PushHandler returns the push source's handler made by WithPushSource, or
// nil.
func (a *Agent) PushHandler() *podconfig.PushHandler { return a.push }

// pushServer runs a PushHandler as a pod source and serves it on addr.
type pushServer struct {
	h    *podconfig.PushHandler
	addr string
	log  *zap.Logger
}

// pushShutdownGrace bounds how long a stopping agent waits for push
// requests in flight.
const pushShutdownGrace = 5 * time.Second

func (p *pushServer) Run(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("push source: %w", err)
	}
	srv := &http.Server{
		Handler:           p.h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	p.log.Named("podconfig.push").Info("serving pushed pods", zap.String("addr", ln.Addr().String()))
	runErr := p.h.Run(ctx) // returns once ctx ends (or its first send fails)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pushShutdownGrace)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("push source: %w", err)
	}
	return runErr
}

// defaultLogger is the logger of a Builder given none: warnings and errors
// to standard error, one human-readable line each.
func defaultLogger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.WarnLevel)
	return zap.New(core)
}
