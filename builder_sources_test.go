package nodekit_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
)

const urlPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"fromurl","namespace":"default"},
"spec":{"containers":[{"name":"c","image":"busybox:1","command":["sleep","3600"]}]}}`

// runAgent runs a built agent until the test ends and checks that Run
// returned nil.
func runAgent(t *testing.T, a *nodekit.Agent) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return ctx
}

// deadline bounds a wait that is driven by events (WaitForPod), so a
// failure shows as a test error rather than a hung test.
func deadline(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A manifest URL is one Builder call away, sent with its header, and its
// pod runs under the "http" source.
func TestWithManifestURLRunsItsPods(t *testing.T) {
	var mu sync.Mutex
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotHeader = r.Header.Get("X-Node")
		mu.Unlock()
		_, _ = w.Write([]byte(urlPod))
	}))
	defer srv.Close()
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).
		WithManifestURL(srv.URL+"/pods", http.Header{"X-Node": {"node1"}}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := runAgent(t, a)
	pod, st, err := a.WaitForPod(deadline(t, ctx), "default", "fromurl-node1", nodekit.PodRunning)
	if err != nil {
		t.Fatal(err)
	}
	if src := pod.Annotations[kubetypes.ConfigSourceAnnotation]; src != kubetypes.SourceHTTP {
		t.Errorf("source annotation %q, want %q", src, kubetypes.SourceHTTP)
	}
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container statuses %+v, want one running", st.ContainerStatuses)
	}
	mu.Lock()
	defer mu.Unlock()
	if gotHeader != "node1" {
		t.Errorf("header X-Node = %q, want node1", gotHeader)
	}
}

func TestWithManifestURLRefusesBadURL(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithManifestURL("ftp://example.invalid/pods", nil).Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "scheme") {
		t.Fatalf("Build = %v, want ErrInvalidConfig naming the scheme", err)
	}
}

// WithPushSource(""): the program mounts the handler; a pushed pod runs.
func TestWithPushSourceMountedByTheProgram(t *testing.T) {
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).WithPushSource("").Build()
	if err != nil {
		t.Fatal(err)
	}
	if a.PushHandler() == nil {
		t.Fatal("PushHandler is nil after WithPushSource")
	}
	ctx := runAgent(t, a)
	srv := httptest.NewServer(a.PushHandler())
	defer srv.Close()
	push(t, srv.URL)
	if _, _, err := a.WaitForPod(deadline(t, ctx), "default", "fromurl-node1", nodekit.PodRunning); err != nil {
		t.Fatal(err)
	}
}

// WithPushSource(addr): the agent serves the handler on addr while it
// runs.
func TestWithPushSourceServesOnAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).WithPushSource(addr).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := runAgent(t, a)
	wctx := deadline(t, ctx)
	// The listener is up once the push source has been seen (it listens
	// before its first send).
	for !a.PodConfig().SeenAllSources() {
		select {
		case <-wctx.Done():
			t.Fatal("the push source was never seen")
		case <-time.After(10 * time.Millisecond):
		}
	}
	push(t, "http://"+addr)
	if _, _, err := a.WaitForPod(wctx, "default", "fromurl-node1", nodekit.PodRunning); err != nil {
		t.Fatal(err)
	}
}

func TestWithPushSourceRefusesBadAddr(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithPushSource("no-port").Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "no-port") {
		t.Fatalf("Build = %v, want ErrInvalidConfig naming the address", err)
	}
}

func push(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Post(base+"/", "application/json", strings.NewReader(urlPod))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push: %s", resp.Status)
	}
}

// A manifest that does not parse is reported once to WithSourceErrors and
// logged once, truly: there was no last good version, so the log must not
// say one keeps running. The good manifest beside it runs.
func TestSourceErrorsReportedOnceAndTruly(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("kind: Pod\nmetadata: {name: Bad_Name}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte(urlPod), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.WarnLevel)
	var mu sync.Mutex
	var reported []string
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).WithLogger(zap.New(core)).WithManifestDir(dir).
		WithSourceErrors(func(source string, err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, source+": "+err.Error())
		}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := runAgent(t, a)
	// The file source reads both manifests in its first pass, before it
	// sends the good one's pod: once that pod runs, the bad one has been
	// reported.
	if _, _, err := a.WaitForPod(deadline(t, ctx), "default", "fromurl-node1", nodekit.PodRunning); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !strings.HasPrefix(reported[0], "file: ") || !strings.Contains(reported[0], "bad.yaml") {
		t.Fatalf("reported %q, want one error from the file source naming bad.yaml", reported)
	}
	var lines []string
	for _, e := range logs.All() {
		if strings.Contains(e.Message, "manifest") || strings.Contains(e.Message, "last good") {
			lines = append(lines, e.Message)
		}
	}
	if len(lines) != 1 || strings.Contains(lines[0], "keep") {
		t.Fatalf("manifest log lines %q, want one that does not claim a last good version", lines)
	}
}

// WaitForPod returns ErrPodTerminal for a pod that ended without meeting
// the condition, and ctx's error, naming the pod, when ctx ends first.
func TestWaitForPodTerminalAndDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "uid-job",
				Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: "test"}},
			Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{
				{Name: "c", Image: "busybox:1", Command: []string{"sh", "-c", "sleep 5; exit 3"}},
			}},
		}
		a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
			WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).
			WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &onePodSource{out: out, pods: []*v1.Pod{pod}}, nil
			}).Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx := runAgent(t, a)
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, _, err := a.WaitForPod(short, "default", "nosuch", nodekit.PodRunning); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "default/nosuch") {
			t.Fatalf("WaitForPod of a missing pod = %v, want DeadlineExceeded naming it", err)
		}
		start := time.Now()
		_, st, err := a.WaitForPod(ctx, "default", "job", nodekit.PodPhase(v1.PodSucceeded))
		if !errors.Is(err, nodekit.ErrPodTerminal) || st.Phase != v1.PodFailed {
			t.Fatalf("WaitForPod(Succeeded) of a failing job = %v, phase %s; want ErrPodTerminal, Failed", err, st.Phase)
		}
		if took := time.Since(start); took < 4*time.Second {
			t.Errorf("returned after %v of virtual time, before the job could have ended", took)
		}
		if _, st, err := a.WaitForPod(ctx, "default", "job", nodekit.PodPhase(v1.PodFailed)); err != nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 3 {
			t.Fatalf("WaitForPod(Failed) = %v, %+v", err, st.ContainerStatuses)
		}
		if err := a.Healthy(); err != nil {
			t.Errorf("Healthy = %v", err)
		}
	})
}

// Healthy is false, with reasons, until the agent runs and its sources
// have been seen.
func TestHealthyBeforeRun(t *testing.T) {
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithManifestDir(t.TempDir()).Build()
	if err != nil {
		t.Fatal(err)
	}
	err = a.Healthy()
	if !errors.Is(err, nodekit.ErrUnhealthy) || !strings.Contains(err.Error(), "sync loop has not started") ||
		!strings.Contains(err.Error(), "pod source") {
		t.Fatalf("Healthy before Run = %v", err)
	}
}

// WithManifestPeriods sets the manifest URL's fetch period (the kubelet's
// httpCheckFrequency): three fetches arrive long before the default 20 s
// period would allow a second; a negative period fails Build.
func TestWithManifestPeriods(t *testing.T) {
	fetched := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(urlPod))
		select {
		case fetched <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
		WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).
		WithManifestURL(srv.URL+"/pods", nil).WithManifestPeriods(time.Second, 50*time.Millisecond).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := runAgent(t, a)
	wait := deadline(t, ctx)
	for i := 0; i < 3; i++ {
		select {
		case <-fetched:
		case <-wait.Done():
			t.Fatalf("%d fetches before the deadline, want 3 at a 50ms period", i)
		}
	}

	_, err = nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithLogger(zap.NewNop()).WithManifestDir(t.TempDir()).WithManifestPeriods(-time.Second, 0).Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "Period") {
		t.Errorf("negative file period: %v", err)
	}
}
