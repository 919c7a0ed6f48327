package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestNewRefusesBadConfig(t *testing.T) {
	good := Config{NodeName: "n", Pods: fakePods{}, Authorizer: AlwaysAllow{}, CertDir: "/tmp/x"}
	for name, edit := range map[string]func(*Config){
		"NodeName":    func(c *Config) { c.NodeName = "" },
		"Pods":        func(c *Config) { c.Pods = nil },
		"Authorizer":  func(c *Config) { c.Authorizer = nil },
		"Port":        func(c *Config) { c.Port = 70000 },
		"HealthzPort": func(c *Config) { c.HealthzPort = -1 },
		"TLSKeyFile":  func(c *Config) { c.TLSCertFile = "a" },
		"CertDir":     func(c *Config) { c.CertDir = "" },
		"MaxStreams":  func(c *Config) { c.MaxStreams = -1 },
		"HealthChecks": func(c *Config) {
			c.HealthChecks = []HealthCheck{{Name: "x"}}
		},
	} {
		c := good
		edit(&c)
		_, err := New(c)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t, nil)
	f.authz.grants["viewer/pods"] = true
	f.authz.grants["node-token/healthz"] = true
	// 401: no credentials, and a credential that fails.
	wantCode(t, f.do(t, "GET", "/pods", ""), http.StatusUnauthorized)
	wantCode(t, f.do(t, "GET", "/pods", "!"), http.StatusUnauthorized)
	// 403: authenticated without the subresource; the answer names them.
	w := f.do(t, "GET", "/pods", "node-token")
	wantCode(t, w, http.StatusForbidden)
	if !strings.Contains(w.Body.String(), "user=node-token, verb=get, resource=nodes, subresource(s)=[pods proxy]") {
		t.Errorf("403 body %q", w.Body.String())
	}
	wantCode(t, f.do(t, "POST", "/exec/default/web/app?command=ls&output=1", "viewer"), http.StatusForbidden)
	// pods is enough for /pods (fine-grained), healthz for /healthz.
	wantCode(t, f.do(t, "GET", "/pods", "viewer"), http.StatusOK)
	wantCode(t, f.do(t, "GET", "/healthz", "node-token"), http.StatusOK)
	// 500 when the authorizer fails.
	wantCode(t, f.do(t, "GET", "/pods", "boom"), http.StatusInternalServerError)
}

func TestAnonymousOnlyWhenConfigured(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Anonymous = true })
	wantCode(t, f.do(t, "GET", "/healthz", ""), http.StatusForbidden)
	f.authz.grants[AnonymousUser+"/healthz"] = true
	wantCode(t, f.do(t, "GET", "/healthz", ""), http.StatusOK)
	last := f.authz.seen[len(f.authz.seen)-1]
	if last.User.Name != AnonymousUser || len(last.User.Groups) != 1 || last.User.Groups[0] != AnonymousGroup {
		t.Errorf("anonymous user %+v", last.User)
	}
	// A failing credential is still refused, not taken as anonymous.
	wantCode(t, f.do(t, "GET", "/healthz", "!"), http.StatusUnauthorized)
	// Without an authenticator at all, nothing but anonymous gets in.
	g := newFixture(t, func(c *Config) { c.Authenticator = nil })
	wantCode(t, g.do(t, "GET", "/healthz", "admin"), http.StatusUnauthorized)
}

func TestHealthz(t *testing.T) {
	var syncErr error
	plegOK := true
	f := newFixture(t, func(c *Config) {
		c.SyncLoopHealthy = func() error { return syncErr }
		c.PLEGHealthy = func() (bool, error) { return plegOK, nil }
		c.HealthChecks = []HealthCheck{{Name: "extra", Check: func() error { return nil }}}
	})
	w := f.do(t, "GET", "/healthz", "admin")
	wantCode(t, w, http.StatusOK)
	if w.Body.String() != "ok" {
		t.Errorf("body %q", w.Body.String())
	}
	w = f.do(t, "GET", "/healthz?verbose", "admin")
	want := "[+]ping ok\n[+]log ok\n[+]syncloop ok\n[+]pleg ok\n[+]extra ok\nhealthz check passed\n"
	if w.Body.String() != want {
		t.Errorf("verbose body %q", w.Body.String())
	}
	for _, c := range []string{"ping", "log", "syncloop", "pleg", "extra"} {
		wantCode(t, f.do(t, "GET", "/healthz/"+c, "admin"), http.StatusOK)
	}
	wantCode(t, f.do(t, "GET", "/healthz/nope", "admin"), http.StatusNotFound)

	syncErr = errors.New("sync loop took longer than expected")
	plegOK = false
	w = f.do(t, "GET", "/healthz", "admin")
	wantCode(t, w, http.StatusInternalServerError)
	if !strings.Contains(w.Body.String(), "[-]syncloop failed: reason withheld") ||
		!strings.Contains(w.Body.String(), "[-]pleg failed") || strings.Contains(w.Body.String(), "longer") {
		t.Errorf("failing body %q", w.Body.String())
	}
	w = f.do(t, "GET", "/healthz/syncloop", "admin")
	wantCode(t, w, http.StatusInternalServerError)
	wantCode(t, f.do(t, "GET", "/healthz?exclude=syncloop&exclude=pleg", "admin"), http.StatusOK)

	// The health port: /healthz without credentials, nothing else.
	hz := f.srv.HealthzHandler()
	r := httptestRequest("GET", "/healthz")
	rec := newRecorder()
	hz.ServeHTTP(rec, r)
	wantCode(t, rec, http.StatusInternalServerError)
	syncErr, plegOK = nil, true
	rec = newRecorder()
	hz.ServeHTTP(rec, httptestRequest("GET", "/healthz"))
	wantCode(t, rec, http.StatusOK)
	rec = newRecorder()
	hz.ServeHTTP(rec, httptestRequest("GET", "/pods"))
	wantCode(t, rec, http.StatusNotFound)
}

func TestPodsAndRunningPods(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, "GET", "/pods", "admin")
	wantCode(t, w, http.StatusOK)
	var l v1.PodList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if l.Kind != "PodList" || l.APIVersion != "v1" || len(l.Items) != 1 || l.Items[0].Name != "web" || l.Items[0].Spec.Containers[0].Image != "busybox" {
		t.Errorf("pods %+v", l)
	}
	w = f.do(t, "GET", "/runningpods/", "admin")
	wantCode(t, w, http.StatusOK)
	l = v1.PodList{}
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].UID != testUID || l.Items[0].Spec.Containers[0].Name != "app" || f.rt.all[0] {
		t.Errorf("running pods %+v (all=%v)", l, f.rt.all)
	}
	f.rt.err = errors.New("runtime down")
	wantCode(t, f.do(t, "GET", "/runningpods/", "admin"), http.StatusInternalServerError)
	g := newFixture(t, func(c *Config) { c.RuntimePods = nil })
	wantCode(t, g.do(t, "GET", "/runningpods/", "admin"), http.StatusNotImplemented)
}

func TestConfigz(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Configz = func() (any, error) { return map[string]int{"maxPods": 110}, nil }
	})
	w := f.do(t, "GET", "/configz", "admin")
	wantCode(t, w, http.StatusOK)
	if strings.TrimSpace(w.Body.String()) != `{"kubeletconfig":{"maxPods":110}}` {
		t.Errorf("configz %q", w.Body.String())
	}
	g := newFixture(t, nil)
	wantCode(t, g.do(t, "GET", "/configz", "admin"), http.StatusNotFound)
}

func TestMetricsRoutes(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "prober_probe_total", Help: "h"}, []string{"result"})
	c.WithLabelValues("successful").Inc()
	other := prometheus.NewCounter(prometheus.CounterOpts{Name: "nodekit_other_total", Help: "h"})
	reg.MustRegister(c, other)
	res := prometheus.NewGauge(prometheus.GaugeOpts{Name: "node_cpu_usage_seconds_total", Help: "h"})
	f := newFixture(t, func(cfg *Config) { cfg.Metrics = reg; cfg.ResourceMetrics = res })
	w := f.do(t, "GET", "/metrics", "admin")
	wantCode(t, w, http.StatusOK)
	if !strings.Contains(w.Body.String(), "nodekit_other_total 0") || !strings.Contains(w.Body.String(), "prober_probe_total") {
		t.Errorf("/metrics %q", w.Body.String())
	}
	w = f.do(t, "GET", "/metrics/probes", "admin")
	wantCode(t, w, http.StatusOK)
	if !strings.Contains(w.Body.String(), `prober_probe_total{result="successful"} 1`) || strings.Contains(w.Body.String(), "nodekit_other") {
		t.Errorf("/metrics/probes %q", w.Body.String())
	}
	w = f.do(t, "GET", "/metrics/resource", "admin")
	wantCode(t, w, http.StatusOK)
	if !strings.Contains(w.Body.String(), "node_cpu_usage_seconds_total 0") {
		t.Errorf("/metrics/resource %q", w.Body.String())
	}
	g := newFixture(t, nil)
	for _, p := range []string{"/metrics", "/metrics/probes", "/metrics/resource", "/stats/summary"} {
		wantCode(t, g.do(t, "GET", p, "admin"), http.StatusNotFound)
	}
}

func TestStatsSummaryHook(t *testing.T) {
	st := &fakeStats{}
	f := newFixture(t, func(c *Config) { c.Stats = st })
	w := f.do(t, "GET", "/stats/summary", "admin")
	wantCode(t, w, http.StatusOK)
	var s statsapi.Summary
	if err := json.Unmarshal(w.Body.Bytes(), &s); err != nil || s.Node.NodeName != "node1" {
		t.Fatalf("summary %q: %v", w.Body.String(), err)
	}
	wantCode(t, f.do(t, "GET", "/stats/summary?only_cpu_and_memory=true", "admin"), http.StatusOK)
	wantCode(t, f.do(t, "GET", "/stats/summary?only_cpu_and_memory=maybe", "admin"), http.StatusBadRequest)
	if len(st.only) != 2 || st.only[0] || !st.only[1] {
		t.Errorf("onlyCPUAndMemory calls %v", st.only)
	}
	// stats needs the stats subresource, not proxy.
	f.authz.grants["proxyonly/proxy"] = true
	wantCode(t, f.do(t, "GET", "/stats/summary", "proxyonly"), http.StatusForbidden)
}
