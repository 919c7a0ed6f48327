package prober

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// execFunc is an ExecRunner over a function.
type execFunc func(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error)

func (f execFunc) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	return f(ctx, id, cmd, timeout)
}

func TestExecProbe(t *testing.T) {
	big := []byte(strings.Repeat("x", 2*MaxOutput))
	var gotID string
	var gotTimeout time.Duration
	for _, tc := range []struct {
		name    string
		out     []byte
		err     error
		want    Result
		wantErr bool
		outLen  int
	}{
		{name: "exit 0", out: []byte("ok"), want: Success, outLen: 4},
		{name: "exit 1", out: []byte("bad"), err: &fake.ExitError{Code: 1}, want: Failure, outLen: 6},
		{name: "exit error with code 0", err: &fake.ExitError{Code: 0}, want: Success},
		{name: "timeout", err: fmt.Errorf("wrapped: %w", context.DeadlineExceeded), want: Failure, outLen: -1},
		{name: "capped", out: big, want: Success, outLen: MaxOutput},
		{name: "other error", err: errors.New("no such container"), want: Unknown, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewExecProber(execFunc(func(_ context.Context, id string, _ []string, timeout time.Duration) ([]byte, []byte, error) {
				gotID, gotTimeout = id, timeout
				return tc.out, tc.out, tc.err
			}))
			r, out, err := p.ProbeExec(t.Context(), "containerd://abc", []string{"cat", "/tmp/healthy"}, 3*time.Second)
			if r != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("got %v, %v; want %v (error %v)", r, err, tc.want, tc.wantErr)
			}
			if tc.outLen >= 0 && len(out) != tc.outLen {
				t.Errorf("output length %d, want %d", len(out), tc.outLen)
			}
			if gotID != "abc" || gotTimeout != 3*time.Second {
				t.Errorf("ExecSync(%q, %v), want the raw id and the probe's timeout", gotID, gotTimeout)
			}
		})
	}
	if r, _, err := NewExecProber(nil).ProbeExec(t.Context(), "x", []string{"true"}, time.Second); r != Unknown || !errors.Is(err, ErrNoExec) {
		t.Errorf("no runner: %v %v", r, err)
	}
}

func TestExecProbeOnFakeRuntime(t *testing.T) {
	// runtime/fake's ExitError is recognised through errors.As.
	p := NewExecProber(execFunc(func(context.Context, string, []string, time.Duration) ([]byte, []byte, error) {
		return []byte("out"), []byte("err"), fmt.Errorf("exec: %w", &fake.ExitError{Code: 2})
	}))
	r, out, err := p.ProbeExec(t.Context(), "id", []string{"x"}, time.Second)
	if r != Failure || out != "outerr" || err != nil {
		t.Errorf("%v %q %v", r, out, err)
	}
}

func hostPort(t *testing.T, raw string) (string, int) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return u.Hostname(), port
}

func TestHTTPProbe(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // never reached
	}))
	defer other.Close()
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	var gotHeader, gotUA, gotHost string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader, gotUA, gotHost = r.Header.Get("X-Probe"), r.UserAgent(), r.Host
		switch r.URL.Path {
		case "/ok":
			fmt.Fprint(w, "fine")
		case "/big":
			fmt.Fprint(w, strings.Repeat("y", 3*MaxOutput))
		case "/redirect-local":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/redirect-other":
			http.Redirect(w, r, otherURL+"/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/teapot":
			w.WriteHeader(http.StatusTeapot)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	c := &v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	p := NewHTTPProber()
	for _, tc := range []struct {
		path    string
		port    intstr.IntOrString
		want    Result
		outPfx  string
		outLen  int
		headers []v1.HTTPHeader
	}{
		{path: "/ok", port: intstr.FromInt32(int32(port)), want: Success, outPfx: "fine"},
		{path: "/ok", port: intstr.FromString("http"), want: Success, outPfx: "fine",
			headers: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}, {Name: "Host", Value: "example.test"}}},
		{path: "/big", port: intstr.FromString("http"), want: Success, outLen: MaxOutput},
		{path: "/redirect-local", port: intstr.FromString("http"), want: Success, outPfx: "fine"},
		{path: "/redirect-other", port: intstr.FromString("http"), want: Success, outPfx: redirectWarning},
		{path: "/loop", port: intstr.FromString("http"), want: Failure, outPfx: "Get"},
		{path: "/teapot", port: intstr.FromString("http"), want: Failure, outPfx: "HTTP probe failed with statuscode: 418"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			req, err := newHTTPRequest(&v1.HTTPGetAction{Path: tc.path, Port: tc.port, HTTPHeaders: tc.headers}, c, host)
			if err != nil {
				t.Fatal(err)
			}
			r, out, err := p.ProbeHTTP(t.Context(), req, 5*time.Second)
			if err != nil || r != tc.want {
				t.Fatalf("%v %v, want %v (%q)", r, err, tc.want, out)
			}
			if tc.outPfx != "" && !strings.HasPrefix(out, tc.outPfx) {
				t.Errorf("output %q, want prefix %q", out, tc.outPfx)
			}
			if tc.outLen > 0 && len(out) != tc.outLen {
				t.Errorf("output length %d, want %d", len(out), tc.outLen)
			}
			if tc.headers != nil && (gotHeader != "1" || gotHost != "example.test") {
				t.Errorf("headers not sent: X-Probe %q Host %q", gotHeader, gotHost)
			}
			if gotUA != UserAgent {
				t.Errorf("User-Agent %q", gotUA)
			}
		})
	}
	// Nothing listens: Failure.
	srv.Close()
	req, _ := newHTTPRequest(&v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}, c, host)
	if r, _, err := p.ProbeHTTP(t.Context(), req, time.Second); r != Failure || err != nil {
		t.Errorf("closed server: %v %v", r, err)
	}
}

func TestHTTPRequestErrors(t *testing.T) {
	c := &v1.Container{Name: "c"}
	for _, a := range []v1.HTTPGetAction{
		{Port: intstr.FromString("nope")},
		{Port: intstr.FromInt32(0)},
		{Port: intstr.FromInt32(70000)},
		{Port: intstr.FromInt32(80), Scheme: "ftp"},
	} {
		if _, err := newHTTPRequest(&a, c, "10.0.0.1"); !errors.Is(err, ErrBadProbe) {
			t.Errorf("%+v: %v, want ErrBadProbe", a, err)
		}
	}
	req, err := newHTTPRequest(&v1.HTTPGetAction{Port: intstr.FromString("8080"), Path: "/h?x=1", Scheme: "HTTPS",
		HTTPHeaders: []v1.HTTPHeader{{Name: "Accept", Value: ""}}}, c, "10.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.String() != "https://10.0.0.1:8080/h?x=1" || req.Header.Get("Accept") != "" {
		t.Errorf("url %s accept %q", req.URL, req.Header.Get("Accept"))
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p := NewTCPProber()
	if r, _, err := p.ProbeTCP(t.Context(), "127.0.0.1", port, time.Second); r != Success || err != nil {
		t.Errorf("open port: %v %v", r, err)
	}
	ln.Close()
	if r, out, err := p.ProbeTCP(t.Context(), "127.0.0.1", port, time.Second); r != Failure || err != nil || out == "" {
		t.Errorf("closed port: %v %q %v", r, out, err)
	}
}

func TestGRPCProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	defer func() { srv.Stop(); <-done }()
	port := ln.Addr().(*net.TCPAddr).Port
	p := NewGRPCProber()
	for _, tc := range []struct {
		svc  string
		want Result
		out  string
	}{
		{"", Success, "service healthy"},
		{"db", Failure, `service unhealthy (responded with "NOT_SERVING")`},
		{"missing", Failure, "error: health rpc probe failed"},
	} {
		r, out, err := p.ProbeGRPC(t.Context(), "127.0.0.1", port, tc.svc, 5*time.Second)
		if r != tc.want || err != nil || !strings.HasPrefix(out, tc.out) {
			t.Errorf("service %q: %v %q %v", tc.svc, r, out, err)
		}
	}
	// A server without the health service.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bare := grpc.NewServer()
	done2 := make(chan struct{})
	go func() { defer close(done2); _ = bare.Serve(ln2) }()
	defer func() { bare.Stop(); <-done2 }()
	r, out, _ := p.ProbeGRPC(t.Context(), "127.0.0.1", ln2.Addr().(*net.TCPAddr).Port, "", 5*time.Second)
	if r != Failure || !strings.Contains(out, "does not implement the grpc health protocol") {
		t.Errorf("no health service: %v %q", r, out)
	}
}

func TestRunDispatch(t *testing.T) {
	s := &scripted{r: Success}
	ps := &probers{exec: s, http: s, tcp: s, grpc: s}
	pod := &v1.Pod{}
	st := &v1.PodStatus{PodIP: "10.1.1.1"}
	c := &v1.Container{Name: "c"}
	svc := "x"
	for _, h := range []v1.ProbeHandler{
		{Exec: &v1.ExecAction{Command: []string{"x"}}},
		{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt32(80)}},
		{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}},
		{GRPC: &v1.GRPCAction{Port: 9000, Service: &svc}},
	} {
		if r, _, err := ps.run(t.Context(), &v1.Probe{ProbeHandler: h}, pod, st, c, "id"); r != Success || err != nil {
			t.Errorf("%+v: %v %v", h, r, err)
		}
	}
	for _, h := range []v1.ProbeHandler{
		{},
		{GRPC: &v1.GRPCAction{Port: 0}},
		{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("none")}},
	} {
		if _, _, err := ps.run(t.Context(), &v1.Probe{ProbeHandler: h}, pod, st, c, "id"); !errors.Is(err, ErrBadProbe) {
			t.Errorf("%+v: %v, want ErrBadProbe", h, err)
		}
	}
}

func TestProbeHost(t *testing.T) {
	hostNet := &v1.Pod{Spec: v1.PodSpec{HostNetwork: true}}
	for _, tc := range []struct {
		pod  *v1.Pod
		st   v1.PodStatus
		want string
	}{
		{&v1.Pod{}, v1.PodStatus{PodIP: "10.0.0.2"}, "10.0.0.2"},
		{hostNet, v1.PodStatus{HostIP: "192.168.1.5"}, "192.168.1.5"},
		{hostNet, v1.PodStatus{}, "127.0.0.1"},
		{&v1.Pod{}, v1.PodStatus{}, ""},
	} {
		if got := probeHost(tc.pod, &tc.st); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
}

func TestExpandCommand(t *testing.T) {
	env := []v1.EnvVar{{Name: "FILE", Value: "/tmp/h"}, {Name: "REF", ValueFrom: &v1.EnvVarSource{}}}
	got := expandCommand([]string{"cat", "$(FILE)", "$(REF)", "$$(FILE)", "$(NONE)", "a$"}, env)
	want := []string{"cat", "/tmp/h", "$(REF)", "$(FILE)", "$(NONE)", "a$"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{UpdatesBuffer: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Status", "UpdatesBuffer"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}
