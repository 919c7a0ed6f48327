package podconfig

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	testPodJSON  = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	testListYAML = `apiVersion: v1
kind: PodList
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a, namespace: ns1}
  spec: {containers: [{name: c, image: busybox}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: b}
  spec: {containers: [{name: c, image: busybox}]}
`
)

// bodyServer serves whatever body/status the test sets, and counts requests.
type bodyServer struct {
	*httptest.Server
	body     atomic.Value // string
	status   atomic.Int64
	requests atomic.Int64
	headers  chan http.Header
}

func newBodyServer(t *testing.T, body string) *bodyServer {
	t.Helper()
	s := &bodyServer{headers: make(chan http.Header, 100)}
	s.body.Store(body)
	s.status.Store(http.StatusOK)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.headers <- r.Header.Clone()
		w.WriteHeader(int(s.status.Load()))
		_, _ = w.Write([]byte(s.body.Load().(string)))
	}))
	t.Cleanup(s.Close)
	return s
}

// httpLeakCheck checks for leaked goroutines after every other cleanup of
// the test (servers, transports) has run.
func httpLeakCheck(t *testing.T) {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func newTestHTTPSource(t *testing.T, cfg HTTPSourceConfig) *HTTPSource {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = "Node1"
	}
	if cfg.Client == nil {
		// No keep-alive: goleak runs before t.Cleanup would close idle
		// connections.
		cfg.Client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	s, err := NewHTTPSource(cfg)
	if err != nil {
		t.Fatalf("NewHTTPSource: %v", err)
	}
	return s
}

func expectNoUpdate(t *testing.T, ch chan kubetypes.PodUpdate) {
	t.Helper()
	select {
	case u := <-ch:
		t.Fatalf("unexpected update %v with %d pods", u.Op, len(u.Pods))
	default:
	}
}

func recvUpdate(t *testing.T, ch chan kubetypes.PodUpdate) kubetypes.PodUpdate {
	t.Helper()
	select {
	case u := <-ch:
		return u
	default:
		t.Fatalf("no update sent")
		return kubetypes.PodUpdate{}
	}
}

func TestHTTPSourceDecodesPodAndPodList(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, testPodJSON)
	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out})
	ctx := t.Context()

	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	u := recvUpdate(t, out)
	if u.Op != kubetypes.SET || u.Source != kubetypes.SourceHTTP || len(u.Pods) != 1 {
		t.Fatalf("update = %v/%s with %d pods, want SET/http with 1", u.Op, u.Source, len(u.Pods))
	}
	p := u.Pods[0]
	if p.Name != "web-node1" || p.Namespace != "default" || p.Spec.NodeName != "Node1" || p.UID == "" {
		t.Fatalf("pod not defaulted as a static pod: %s/%s node=%q uid=%q", p.Namespace, p.Name, p.Spec.NodeName, p.UID)
	}
	for _, tol := range p.Spec.Tolerations {
		if tol.Effect == "NoExecute" {
			t.Fatalf("HTTP pods must not get the NoExecute toleration")
		}
	}

	// The same bytes again: nothing sent.
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	expectNoUpdate(t, out)

	srv.body.Store(testListYAML)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	u = recvUpdate(t, out)
	var names []string
	for _, p := range u.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if got := strings.Join(names, ","); got != "ns1/a-node1,default/b-node1" {
		t.Fatalf("pods = %s", got)
	}
	if srv.requests.Load() != 3 {
		t.Fatalf("requests = %d, want 3", srv.requests.Load())
	}
}

func TestHTTPSourceUIDStableAndIndependentOfURLCredentials(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, testPodJSON)
	uid := func(raw string) string {
		out := make(chan kubetypes.PodUpdate, 1)
		s := newTestHTTPSource(t, HTTPSourceConfig{URL: raw, Out: out})
		if err := s.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		return string(recvUpdate(t, out).Pods[0].UID)
	}
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword("me", "pw")
	a, b, c := uid(srv.URL), uid(srv.URL), uid(u.String())
	if a != b {
		t.Fatalf("UID not stable: %s vs %s", a, b)
	}
	u.User = url.UserPassword("other", "secret")
	if d := uid(u.String()); d != c {
		t.Fatalf("UID depends on the credentials in the URL: %s vs %s", c, d)
	}
}

func TestHTTPSourceHeadersOnEveryRequest(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, testPodJSON)
	out := make(chan kubetypes.PodUpdate, 10)
	h := http.Header{}
	h.Set("X-Node-Token", "tok")
	h.Add("X-Multi", "1")
	h.Add("X-Multi", "2")
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Header: h, Out: out})
	h.Set("X-Node-Token", "changed-after-New") // the source keeps its own copy
	for i := 0; i < 3; i++ {
		if err := s.Sync(t.Context()); err != nil {
			t.Fatal(err)
		}
		got := <-srv.headers
		if got.Get("X-Node-Token") != "tok" || strings.Join(got.Values("X-Multi"), ",") != "1,2" {
			t.Fatalf("request %d headers = %v", i, got)
		}
	}
}

func TestHTTPSourceEmptyBodySendsEmptySetOnce(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, testPodJSON)
	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out})
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	recvUpdate(t, out)
	srv.body.Store("")
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	u := recvUpdate(t, out)
	if u.Op != kubetypes.SET || u.Pods == nil || len(u.Pods) != 0 {
		t.Fatalf("update = %v with %v, want an empty SET", u.Op, u.Pods)
	}
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	expectNoUpdate(t, out)
}

func TestHTTPSourceNon200SendsNothing(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, testPodJSON)
	srv.status.Store(http.StatusInternalServerError)
	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out})
	err := s.Sync(t.Context())
	if !errors.Is(err, ErrHTTPStatus) || !strings.Contains(err.Error(), "500") {
		t.Fatalf("err = %v, want ErrHTTPStatus naming 500", err)
	}
	expectNoUpdate(t, out)
	// Recovery: the same body with 200 is sent (the failed body was not
	// remembered).
	srv.status.Store(http.StatusOK)
	if err := s.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u := recvUpdate(t, out); len(u.Pods) != 1 {
		t.Fatalf("got %d pods", len(u.Pods))
	}
}

func TestHTTPSourceBodyCap(t *testing.T) {
	httpLeakCheck(t)
	srv := newBodyServer(t, "")
	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out, MaxBodyBytes: int64(len(testPodJSON))})
	srv.body.Store(testPodJSON + " ") // one byte over
	if err := s.Sync(t.Context()); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("err = %v, want ErrBodyTooLarge", err)
	}
	expectNoUpdate(t, out)
	srv.body.Store(testPodJSON) // exactly at the cap
	if err := s.Sync(t.Context()); err != nil {
		t.Fatalf("body at the cap: %v", err)
	}
	recvUpdate(t, out)
}

func TestHTTPSourceInvalidPodsSendNothing(t *testing.T) {
	httpLeakCheck(t)
	bad := map[string]string{
		"no version":     `{"kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		"bad version":    `{"apiVersion":"v9","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		"no name":        `{"apiVersion":"v1","kind":"Pod","metadata":{},"spec":{"containers":[{"name":"c","image":"i"}]}}`,
		"bad ctr name":   `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"_C_","image":"i"}]}}`,
		"dup volumes":    `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"volumes":[{"name":"v","emptyDir":{}},{"name":"v","emptyDir":{}}],"containers":[{"name":"c","image":"i"}]}}`,
		"not a manifest": `hello world`,
	}
	for name, body := range bad {
		t.Run(name, func(t *testing.T) {
			srv := newBodyServer(t, body)
			out := make(chan kubetypes.PodUpdate, 10)
			s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out})
			err := s.Sync(t.Context())
			if !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("err = %v, want ErrInvalidManifest", err)
			}
			expectNoUpdate(t, out)
			// The same bad bytes are not reported again.
			if err := s.Sync(t.Context()); err != nil {
				t.Fatalf("second Sync of the same bad body: %v", err)
			}
			expectNoUpdate(t, out)
		})
	}
}

func TestHTTPSourceRedirects(t *testing.T) {
	httpLeakCheck(t)
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		_, _ = w.Write([]byte(testPodJSON))
	}))
	defer other.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("/same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/pods", http.StatusFound)
	})
	mux.HandleFunc("/pods", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Token") != "t" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(testPodJSON))
	})
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	hdr := http.Header{"X-Token": {"t"}}

	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL + "/same", Header: hdr, Out: out})
	if err := s.Sync(t.Context()); err != nil {
		t.Fatalf("same-origin redirect: %v", err)
	}
	recvUpdate(t, out)

	for _, path := range []string{"/elsewhere", "/loop"} {
		s = newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL + path, Header: hdr, Out: out})
		if err := s.Sync(t.Context()); !errors.Is(err, ErrRedirectRefused) {
			t.Fatalf("%s: err = %v, want ErrRedirectRefused", path, err)
		}
		expectNoUpdate(t, out)
	}
	if otherHits.Load() != 0 {
		t.Fatalf("the other host got %d requests", otherHits.Load())
	}

	// A caller's own CheckRedirect still runs for allowed redirects.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	userErr := errors.New("caller refuses")
	s = newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL + "/same", Header: hdr, Out: out, Client: &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return userErr },
	}})
	if err := s.Sync(t.Context()); !errors.Is(err, userErr) {
		t.Fatalf("err = %v, want the caller's CheckRedirect error", err)
	}
}

// TestHTTPSourceSecretsNeverLogged sets a secret header value and
// credentials in the URL and drives every failure path through Run's
// logging; no error and no log line may contain them.
func TestHTTPSourceSecretsNeverLogged(t *testing.T) {
	httpLeakCheck(t)
	const secretHeader = "hdr-s3cr3t-value"
	const secretUser, secretPass = "usr-s3cr3t", "pw-s3cr3t"
	secrets := []string{secretHeader, secretUser, secretPass}

	var other *httptest.Server
	mode := atomic.Value{}
	mode.Store("500")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load().(string) {
		case "500":
			// Reflect the secret in the status text and body.
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(r.Header.Get("X-Secret")))
		case "redirect":
			u, _ := url.Parse(other.URL)
			u.User = url.UserPassword(secretUser, secretPass)
			u.RawQuery = "h=" + r.Header.Get("X-Secret")
			http.Redirect(w, r, u.String(), http.StatusFound)
		case "bad":
			_, _ = fmt.Fprintf(w, "apiVersion: v1\nkind: Pod\nmetadata: {name: %q}\n", r.Header.Get("X-Secret")+"_INVALID")
		case "big":
			_, _ = w.Write([]byte(strings.Repeat(secretHeader, 100)))
		}
	}))
	defer srv.Close()
	other = httptest.NewServer(http.NotFoundHandler())
	defer other.Close()

	core, logs := observer.New(zapcore.DebugLevel)
	u, _ := url.Parse(srv.URL)
	u.User = url.UserPassword(secretUser, secretPass)
	out := make(chan kubetypes.PodUpdate, 10)
	s := newTestHTTPSource(t, HTTPSourceConfig{
		URL:          u.String(),
		Header:       http.Header{"X-Secret": {secretHeader}},
		Out:          out,
		MaxBodyBytes: 1000,
		Logger:       zap.New(core),
	})
	var errs []error
	for _, m := range []string{"500", "redirect", "bad", "big", "500", "500"} {
		mode.Store(m)
		err := s.Sync(t.Context())
		if err == nil {
			t.Fatalf("mode %s: no error", m)
		}
		s.logResult(err)
		errs = append(errs, err)
	}
	srv.Close() // connection refused
	err := s.Sync(t.Context())
	if err == nil {
		t.Fatal("closed server: no error")
	}
	s.logResult(err)
	errs = append(errs, err)

	if logs.Len() != len(errs) {
		t.Fatalf("%d log entries for %d failures", logs.Len(), len(errs))
	}
	for _, err := range errs {
		for _, sec := range secrets {
			if strings.Contains(err.Error(), sec) {
				t.Errorf("error contains a secret: %v", err)
			}
		}
	}
	for _, e := range logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		for _, sec := range secrets {
			if strings.Contains(line, sec) {
				t.Errorf("log line contains a secret: %s", line)
			}
		}
		if !strings.Contains(line, "redacted@127.0.0.1") {
			t.Errorf("log line does not name the (redacted) URL: %s", line)
		}
	}
	// After three warnings the rest go to debug level.
	if got := logs.FilterLevelExact(zapcore.WarnLevel).Len(); got != httpQuietAfter {
		t.Errorf("%d warnings, want %d", got, httpQuietAfter)
	}
	expectNoUpdate(t, out)
}

func TestHTTPSourceRunPeriodicAndStops(t *testing.T) {
	httpLeakCheck(t)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		_, _ = fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p%d"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, i)
	}))
	defer srv.Close()
	fc := clocktesting.NewFakeClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	out := make(chan kubetypes.PodUpdate)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out, Clock: fc, Period: DefaultHTTPPeriod})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()

	for i := 1; i <= 3; i++ {
		u := <-out
		if want := fmt.Sprintf("p%d-node1", i); len(u.Pods) != 1 || u.Pods[0].Name != want {
			t.Fatalf("update %d: %v", i, u.Pods)
		}
		for !fc.HasWaiters() {
			runtime.Gosched()
		}
		fc.Step(DefaultHTTPPeriod - 1)
		select {
		case u := <-out:
			t.Fatalf("update before the period elapsed: %v", u.Pods)
		default:
		}
		fc.Step(1)
	}
	// Stop while the source is blocked sending to Out.
	for n.Load() < 4 {
		runtime.Gosched()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestNewHTTPSourceConfigErrors(t *testing.T) {
	out := make(chan kubetypes.PodUpdate)
	cases := []struct {
		cfg   HTTPSourceConfig
		field string
	}{
		{HTTPSourceConfig{NodeName: "n", Out: out}, "URL"},
		{HTTPSourceConfig{URL: "ftp://x/", NodeName: "n", Out: out}, "URL"},
		{HTTPSourceConfig{URL: "http:///path", NodeName: "n", Out: out}, "URL"},
		{HTTPSourceConfig{URL: "http://x/", Out: out}, "NodeName"},
		{HTTPSourceConfig{URL: "http://x/", NodeName: "n"}, "Out"},
		{HTTPSourceConfig{URL: "http://x/", NodeName: "n", Out: out, Period: -1}, "Period"},
		{HTTPSourceConfig{URL: "http://x/", NodeName: "n", Out: out, MaxBodyBytes: MaxManifestSize + 1}, "MaxBodyBytes"},
		{HTTPSourceConfig{URL: "http://x/", NodeName: "n", Out: out, Header: http.Header{"Bad Name": {"v"}}}, "Header"},
		{HTTPSourceConfig{URL: "http://x/", NodeName: "n", Out: out, Header: http.Header{"X": {"sec\nret"}}}, "Header"},
	}
	for _, c := range cases {
		_, err := NewHTTPSource(c.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.field)
		}
		if err != nil && strings.Contains(err.Error(), "sec\nret") {
			t.Errorf("error shows a header value: %v", err)
		}
	}
}

func TestHTTPSourceTimeout(t *testing.T) {
	httpLeakCheck(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	out := make(chan kubetypes.PodUpdate, 1)
	s := newTestHTTPSource(t, HTTPSourceConfig{URL: srv.URL, Out: out, Timeout: 50 * time.Millisecond})
	if err := s.Sync(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	expectNoUpdate(t, out)
}

func TestHTTPSourceOnErrorOncePerDistinctError(t *testing.T) {
	var got []string
	s, err := NewHTTPSource(HTTPSourceConfig{
		URL: "http://127.0.0.1:1/pods", NodeName: "n", Out: make(chan kubetypes.PodUpdate, 1),
		OnError: func(err error) { got = append(got, err.Error()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	a, b := errors.New("fetch failed: a"), errors.New("fetch failed: b")
	for _, e := range []error{a, a, b, context.Canceled, nil, a} {
		s.logResult(e)
	}
	want := []string{"fetch failed: a", "fetch failed: b", "fetch failed: a"}
	if !slices.Equal(got, want) {
		t.Fatalf("OnError calls = %q, want %q", got, want)
	}
}
