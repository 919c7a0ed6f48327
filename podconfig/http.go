package podconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of HTTPSourceConfig.
const (
	DefaultHTTPPeriod       = 20 * time.Second
	DefaultHTTPTimeout      = 10 * time.Second
	DefaultHTTPMaxBodyBytes = MaxManifestSize
	// maxHTTPRedirects bounds the same-origin redirects followed.
	maxHTTPRedirects = 10
	// httpQuietAfter is the number of consecutive failures logged at warn
	// level; later ones are logged at debug level until a success.
	httpQuietAfter = 3
)

// HTTPSourceConfig configures an HTTP URL source.
type HTTPSourceConfig struct {
	// URL is fetched with GET; the body is a Pod or a PodList (YAML or
	// JSON). Required; scheme http or https. Credentials in the URL
	// (user:pass@) are used but never logged or put in errors.
	URL string
	// Header is sent with every request. Its values are never logged or put
	// in errors: should a server echo one back (in a body that fails
	// validation, say), Sync's error shows "<redacted>" in its place
	// (values of 4 bytes or more; errors.Is still sees the original chain).
	Header http.Header
	// NodeName is the node the pods run on (name suffix, spec.nodeName).
	// Required.
	NodeName string
	// Period between fetches in Run. Default DefaultHTTPPeriod.
	Period time.Duration
	// Timeout of one fetch, body included. Default DefaultHTTPTimeout.
	Timeout time.Duration
	// MaxBodyBytes caps the body; a longer body is an error
	// (ErrBodyTooLarge) and nothing is sent. Default and upper bound
	// DefaultHTTPMaxBodyBytes.
	MaxBodyBytes int64
	// Client is used for the requests if set (for TLS settings or a custom
	// transport). It is copied; its CheckRedirect is wrapped so redirects to
	// another scheme or host are refused. Default: a client with the
	// default transport.
	Client *http.Client
	// Clock drives Run's period. Default clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig.http".
	Logger *zap.Logger
	// Out receives a SET with the full pod list of the URL whenever it
	// changes. Required.
	Out chan<- kubetypes.PodUpdate
	// OnError, if set, is called from Run's goroutine with a failed
	// fetch or a body that does not decode (the error says which, without
	// credentials), once per distinct error until a fetch succeeds again.
	OnError func(err error)
}

// HTTPSource polls one URL for static pods.
type HTTPSource struct {
	once     lifecycle.Once
	url      string // as configured, used for requests
	redacted string // without user info: logs, errors, UID origin
	origin   *url.URL
	header   http.Header
	nodeName string
	period   time.Duration
	timeout  time.Duration
	maxBody  int64
	client   *http.Client
	clock    clock.Clock
	log      *zap.Logger
	out      chan<- kubetypes.PodUpdate

	// secrets are scrubbed from every error Sync returns: header values
	// and URL credentials, in case a server reflects them back.
	secrets []string

	mu       sync.Mutex // serializes Sync
	last     []byte
	haveLast bool
	failures int
	onError  func(error)
	lastErr  string // the last error given to onError, until a success
}

// NewHTTPSource validates cfg and fills its defaults. It does no I/O.
func NewHTTPSource(cfg HTTPSourceConfig) (*HTTPSource, error) {
	var bad problems
	var u *url.URL
	if cfg.URL == "" {
		bad.add("URL is required")
	} else if pu, err := url.Parse(cfg.URL); err != nil {
		// url.Parse's error quotes the URL; do not pass it on.
		bad.add("URL does not parse")
	} else {
		u = pu
		if u.Scheme != "http" && u.Scheme != "https" {
			bad.add("URL scheme %q is not http or https", u.Scheme)
		}
		if u.Host == "" {
			bad.add("URL has no host")
		}
	}
	if cfg.NodeName == "" {
		bad.add("NodeName is required")
	}
	if cfg.Out == nil {
		bad.add("Out is required")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Header)) {
		if !validHeaderName(name) {
			bad.add("Header name %q is not a valid field name", name)
		}
		if slices.ContainsFunc(cfg.Header[name], func(v string) bool { return !validHeaderValue(v) }) {
			bad.add("Header %q has a value with invalid characters", name)
		}
	}
	if cfg.Period < 0 || cfg.Timeout < 0 || cfg.MaxBodyBytes < 0 {
		bad.add("Period, Timeout and MaxBodyBytes must not be negative")
	}
	if cfg.MaxBodyBytes > DefaultHTTPMaxBodyBytes {
		bad.add("MaxBodyBytes %d exceeds %d", cfg.MaxBodyBytes, DefaultHTTPMaxBodyBytes)
	}
	if err := bad.err(); err != nil {
		return nil, err
	}
	s := &HTTPSource{
		url:      cfg.URL,
		redacted: RedactURL(u),
		origin:   u,
		header:   cfg.Header.Clone(),
		nodeName: cfg.NodeName,
		period:   cfg.Period,
		timeout:  cfg.Timeout,
		maxBody:  cfg.MaxBodyBytes,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		out:      cfg.Out,
		onError:  cfg.OnError,
	}
	s.secrets = secretStrings(u, cfg.Header)
	if s.period == 0 {
		s.period = DefaultHTTPPeriod
	}
	if s.timeout == 0 {
		s.timeout = DefaultHTTPTimeout
	}
	if s.maxBody == 0 {
		s.maxBody = DefaultHTTPMaxBodyBytes
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("podconfig.http").With(zap.String("url", s.redacted))
	var client http.Client
	if cfg.Client != nil {
		client = *cfg.Client
	}
	userCheck := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := s.checkRedirect(req, via); err != nil {
			return err
		}
		if userCheck != nil {
			return userCheck(req, via)
		}
		return nil
	}
	s.client = &client
	return s, nil
}

// RedactURL returns u as a string without its user info (user name and
// password), which is where credentials embedded in a URL live.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		c.User = url.User("redacted")
	}
	return c.String()
}

func (s *HTTPSource) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxHTTPRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRedirectRefused, maxHTTPRedirects)
	}
	if req.URL.Scheme != s.origin.Scheme || req.URL.Host != s.origin.Host {
		// Name only scheme and host: the target's path and query are the
		// server's choice and may carry anything.
		return fmt.Errorf("%w: to %s://%s, another scheme or host than the configured URL", ErrRedirectRefused, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// Sync fetches the URL once and, if the body differs from the last one
// handled, decodes it and sends a SET with its pods to Out (waiting for
// ctx). A non-200 status, a transport error, an oversized body or a body
// that does not decode sends nothing and returns the error; a body equal to
// the last one sends nothing and returns nil; an empty body sends an empty
// SET.
func (s *HTTPSource) Sync(ctx context.Context) error {
	return scrubError(s.sync(ctx), s.secrets)
}

func (s *HTTPSource) sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, err := s.fetch(ctx)
	if err != nil {
		return err
	}
	if s.haveLast && bytes.Equal(data, s.last) {
		return nil
	}
	var pods []*v1.Pod
	if len(bytes.TrimSpace(data)) > 0 {
		pods, err = DecodeStaticPods(data, StaticPodOptions{
			NodeName: s.nodeName,
			Source:   kubetypes.SourceHTTP,
			Origin:   s.redacted,
		})
		if err != nil {
			// Remember the bad body: the same bytes again are not
			// reported again.
			s.last, s.haveLast = data, true
			return err
		}
	} else {
		pods = []*v1.Pod{}
	}
	select {
	case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: kubetypes.SourceHTTP}:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.last, s.haveLast = data, true
	return nil
}

func (s *HTTPSource) fetch(ctx context.Context) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fmt.Errorf("podconfig: GET %s: cannot build request", s.redacted)
	}
	req.Header = s.header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text holds the URL; ours is redacted
		}
		return nil, fmt.Errorf("podconfig: GET %s: %w", s.redacted, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // let the connection be reused
		return nil, fmt.Errorf("%w: GET %s: %s", ErrHTTPStatus, s.redacted, resp.Status)
	}
	data, err := readBody(io.LimitReader(resp.Body, s.maxBody+1), resp.ContentLength, s.maxBody+1)
	if err != nil {
		return nil, fmt.Errorf("podconfig: GET %s: reading body: %w", s.redacted, err)
	}
	if int64(len(data)) > s.maxBody {
		return nil, fmt.Errorf("%w: GET %s: more than %d bytes", ErrBodyTooLarge, s.redacted, s.maxBody)
	}
	return data, nil
}

// Run calls Sync at once and then every Period on the clock until ctx is
// done, logging failures (the first few at warn level, then at debug level
// until a success). It returns nil after ctx is done.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (s *HTTPSource) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	s.log.Info("watching URL", zap.Duration("period", s.period))
	for {
		s.logResult(s.Sync(ctx))
		t := s.clock.NewTimer(s.period)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

func (s *HTTPSource) logResult(err error) {
	if err == nil {
		if s.failures > 0 {
			s.log.Info("reading pods from URL works again", zap.Int("failures", s.failures))
		}
		s.failures = 0
		s.lastErr = ""
		return
	}
	if errors.Is(err, context.Canceled) {
		return
	}
	if s.onError != nil && err.Error() != s.lastErr {
		s.lastErr = err.Error()
		s.onError(err)
	}
	s.failures++
	switch {
	case s.failures < httpQuietAfter:
		s.log.Warn("cannot read pods from URL", zap.Error(err))
	case s.failures == httpQuietAfter:
		s.log.Warn("cannot read pods from URL; logging further failures at debug level", zap.Error(err))
	default:
		s.log.Debug("cannot read pods from URL", zap.Error(err), zap.Int("failures", s.failures))
	}
}

// validHeaderName reports whether name is an RFC 7230 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than horizontal tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// minSecretLen is the shortest header value or URL credential scrubbed from
// errors; shorter ones would mangle unrelated text and guard little.
const minSecretLen = 4

func secretStrings(u *url.URL, h http.Header) []string {
	var out []string
	add := func(v string) {
		if len(v) >= minSecretLen {
			out = append(out, v)
		}
	}
	if u.User != nil {
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	for _, vs := range h {
		for _, v := range vs {
			add(v)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// scrubbedError has the text of an error with secrets replaced; errors.Is
// and errors.As still see the original chain.
type scrubbedError struct {
	err error
	msg string
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

func scrubError(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	changed := false
	for _, sec := range secrets {
		if strings.Contains(msg, sec) {
			msg = strings.ReplaceAll(msg, sec, "<redacted>")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{err: err, msg: msg}
}
