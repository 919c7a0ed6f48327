package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit/kubetypes"
)

type fakePods []*v1.Pod

func (f fakePods) Pods() []*v1.Pod { return f }

type fakeRuntimePods struct {
	pods []*kubetypes.Pod
	err  error
	all  []bool
}

func (f *fakeRuntimePods) GetPods(_ context.Context, all bool) ([]*kubetypes.Pod, error) {
	f.all = append(f.all, all)
	return f.pods, f.err
}

type logCall struct {
	pod       *v1.Pod
	container string
	opts      *v1.PodLogOptions
}

type fakeLogs struct {
	mu    sync.Mutex
	calls []logCall
	out   string
	err   error
}

func (f *fakeLogs) GetContainerLogs(_ context.Context, pod *v1.Pod, c string, o *v1.PodLogOptions, stdout, stderr io.Writer) error {
	f.mu.Lock()
	f.calls = append(f.calls, logCall{pod, c, o})
	f.mu.Unlock()
	if f.out != "" {
		_, _ = io.WriteString(stdout, f.out)
		_, _ = io.WriteString(stderr, "err:"+f.out)
	}
	return f.err
}

type fakeStreaming struct {
	mu     sync.Mutex
	url    string
	err    error
	execs  []*runtimeapi.ExecRequest
	attach []*runtimeapi.AttachRequest
	pfs    []*runtimeapi.PortForwardRequest
}

func (f *fakeStreaming) Exec(_ context.Context, r *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, r)
	return &runtimeapi.ExecResponse{Url: f.url + "/exec/tok"}, f.err
}

func (f *fakeStreaming) Attach(_ context.Context, r *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attach = append(f.attach, r)
	return &runtimeapi.AttachResponse{Url: f.url + "/attach/tok"}, f.err
}

func (f *fakeStreaming) PortForward(_ context.Context, r *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pfs = append(f.pfs, r)
	return &runtimeapi.PortForwardResponse{Url: f.url + "/portforward/tok"}, f.err
}

type fakeRunner struct {
	id  string
	cmd []string
	err error
}

func (f *fakeRunner) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	f.id, f.cmd = id, cmd
	return []byte("out\n"), []byte("err\n"), f.err
}

type fakeStats struct{ only []bool }

func (f *fakeStats) Summary(_ context.Context, only bool) (*statsapi.Summary, error) {
	f.only = append(f.only, only)
	return &statsapi.Summary{Node: statsapi.NodeStats{NodeName: "node1"}}, nil
}

// headerAuthn authenticates "X-User: name[,group...]"; "X-User: !" is an
// authentication error.
type headerAuthn struct{}

func (headerAuthn) Authenticate(r *http.Request) (*User, bool, error) {
	v := r.Header.Get("X-User")
	switch v {
	case "":
		return nil, false, nil
	case "!":
		return nil, false, errors.New("broken credential")
	}
	parts := strings.Split(v, ",")
	return &User{Name: parts[0], Groups: parts[1:]}, true, nil
}

// grantAuthz allows user/subresource pairs; user "boom" fails.
type grantAuthz struct {
	mu     sync.Mutex
	grants map[string]bool
	seen   []Attributes
}

func (g *grantAuthz) Authorize(_ context.Context, a Attributes) (Decision, string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, a)
	if a.User.Name == "boom" {
		return DecisionDeny, "", errors.New("webhook down")
	}
	if g.grants[a.User.Name+"/"+a.Subresource] || g.grants[a.User.Name+"/*"] {
		return DecisionAllow, "", nil
	}
	return DecisionNoOpinion, "", nil
}

type fixture struct {
	srv       *Server
	pods      fakePods
	rt        *fakeRuntimePods
	logs      *fakeLogs
	streaming *fakeStreaming
	runner    *fakeRunner
	authz     *grantAuthz
}

const testUID = types.UID("uid-1")

func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", testUID
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "busybox"}}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
	f := &fixture{
		pods: fakePods{pod},
		rt: &fakeRuntimePods{pods: []*kubetypes.Pod{{ID: testUID, Name: "web", Namespace: "default",
			Containers: []*kubetypes.Container{{ID: "ctr-app", Name: "app", Image: "busybox"}},
			Sandboxes:  []*kubetypes.Container{{ID: "sb-1"}}}}},
		logs:      &fakeLogs{out: "hello\n"},
		streaming: &fakeStreaming{},
		runner:    &fakeRunner{},
		authz:     &grantAuthz{grants: map[string]bool{"admin/*": true}},
	}
	cfg := Config{NodeName: "node1", Pods: f.pods, RuntimePods: f.rt, Logs: f.logs, Streaming: f.streaming,
		Runner: f.runner, Authenticator: headerAuthn{}, Authorizer: f.authz, CertDir: t.TempDir()}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	return f
}

// do runs one request through the API handler as user ("" = none).
func (f *fixture) do(t *testing.T, method, target, user string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	if user != "" {
		r.Header.Set("X-User", user)
	}
	w := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(w, r)
	return w
}

func wantCode(t *testing.T, w *httptest.ResponseRecorder, code int) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d, want %d; body %q", w.Code, code, w.Body.String())
	}
}

var _ = fmt.Sprint

func httptestRequest(method, target string) *http.Request {
	return httptest.NewRequest(method, target, nil)
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
