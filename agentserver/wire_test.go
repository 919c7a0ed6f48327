package agentserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/server"
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
