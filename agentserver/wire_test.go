package agentserver

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/server"
	"github.com/nodekit/nodekit/stats"
)

// TestServerConfigFromAgent: the pods, the runtime engine and the health
// checks come from the built agent; a handler on that config serves the
// agent's pods and its health.
func TestServerConfigFromAgent(t *testing.T) {
	agent, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir()).Build()
	if err != nil {
		t.Fatal(err)
	}
	cfg := ServerConfig(agent, server.Config{NodeName: "node1", CertDir: t.TempDir(), Authorizer: server.AlwaysAllow{},
		Authenticator: server.AuthenticatorFunc(func(*http.Request) (*server.User, bool, error) {
			return &server.User{Name: "admin"}, true, nil
		})})
	if cfg.Pods == nil || cfg.RuntimePods == nil || cfg.SyncLoopHealthy == nil || cfg.PLEGHealthy == nil {
		t.Fatalf("config not filled: %+v", cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/pods", nil))
	var l v1.PodList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || w.Code != http.StatusOK {
		t.Fatalf("/pods: %d %q %v", w.Code, w.Body.String(), err)
	}
	// The PLEG has not relisted yet: /healthz/pleg fails, as the kubelet's.
	w = httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/healthz/pleg", nil))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("/healthz/pleg before a relist: %d", w.Code)
	}
	if err := agent.PLEG().Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	w = httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK {
		t.Errorf("/healthz after a relist: %d %q", w.Code, w.Body.String())
	}
}

// TestWireRefusesBadConfig: Build reports the server's config error.
func TestWireRefusesBadConfig(t *testing.T) {
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime().WithRootDir(t.TempDir())
	Wire(b, Config{Server: server.Config{NodeName: "node1", CertDir: t.TempDir()}})
	if _, err := b.Build(); err == nil {
		t.Fatal("Build accepted a server without an Authorizer")
	}
}

// TestWireServesStats: with Config.Stats the agent's server answers
// /stats/summary with the pods it runs and /metrics/resource with their
// CPU and memory, collected under the request.
func TestWireServesStats(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web",
			Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: "test"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "busybox:1", Command: []string{"sleep", "3600"}}}},
	}
	b := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").WithRootDir(t.TempDir()).
		WithLogger(zap.NewNop()).
		WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
			return sourceFunc(func(ctx context.Context) error {
				select {
				case out <- kubetypes.PodUpdate{Op: kubetypes.SET, Source: "test", Pods: []*v1.Pod{pod}}:
				case <-ctx.Done():
					return nil
				}
				<-ctx.Done()
				return nil
			}), nil
		})
	Wire(b, Config{Stats: &stats.Config{}, Server: server.Config{NodeName: "node1", Address: "127.0.0.1", Port: port,
		CertDir: t.TempDir(), Authorizer: server.AlwaysAllow{},
		Authenticator: server.AuthenticatorFunc(func(*http.Request) (*server.User, bool, error) {
			return &server.User{Name: "admin"}, true, nil
		})}})
	agent, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- agent.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, _, err := agent.WaitForPod(wctx, "default", "web", nodekit.PodRunning); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(path string) (int, string) {
		for {
			resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				return resp.StatusCode, string(body)
			}
			select { // the server may not listen yet
			case <-wctx.Done():
				t.Fatalf("GET %s: %v", path, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	code, body := get("/stats/summary?only_cpu_and_memory=true")
	var sum statsapi.Summary
	if code != http.StatusOK || json.Unmarshal([]byte(body), &sum) != nil {
		t.Fatalf("/stats/summary: %d %s", code, body)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].PodRef.Name != "web" || sum.Node.NodeName != "node1" {
		t.Fatalf("summary pods %+v node %q, want web on node1", sum.Pods, sum.Node.NodeName)
	}
	code, body = get("/metrics/resource")
	if code != http.StatusOK || !strings.Contains(body, `container_memory_working_set_bytes{container="c",namespace="default",pod="web"}`) {
		t.Fatalf("/metrics/resource: %d\n%s", code, body)
	}
}

type sourceFunc func(ctx context.Context) error

func (f sourceFunc) Run(ctx context.Context) error { return f(ctx) }
