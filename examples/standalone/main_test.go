package main

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

func TestShippedManifestsDecode(t *testing.T) {
	names, err := fs.Glob(shipped, "manifests/*.yaml")
	if err != nil || len(names) < 4 {
		t.Fatalf("shipped manifests: %v %v", names, err)
	}
	for _, n := range names {
		data, _ := shipped.ReadFile(n)
		pods, err := podconfig.DecodeStaticPods(data, podconfig.StaticPodOptions{NodeName: "n", Source: kubetypes.SourceFile, Origin: n})
		if err != nil || len(pods) != 1 {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if !pods[0].Spec.HostNetwork {
			t.Errorf("%s: not host network (would need CNI on a real runtime)", n)
		}
	}
}

// TestRunFake runs the example on the fake runtime for a few seconds and
// reads its status file: every shipped pod is reported, the web server runs.
func TestRunFake(t *testing.T) {
	root := t.TempDir()
	statusFile := filepath.Join(root, "status.json")
	o := options{root: root, nodeName: "test", nodeIPs: "192.0.2.4", duration: 4 * time.Second, statusFile: statusFile}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statusFile)
	if err != nil {
		t.Fatal(err)
	}
	var pods []PodReport
	if err := json.Unmarshal(data, &pods); err != nil {
		t.Fatal(err)
	}
	byName := map[string]PodReport{}
	for _, p := range pods {
		byName[p.Name] = p
	}
	if len(byName) != 4 {
		t.Fatalf("status file has %d pods, want 4: %s", len(byName), data)
	}
	// The shipped pods use the host's network: their pod IP is --node-ip.
	if w := byName["web-test"]; w.PodIP != "192.0.2.4" || w.HostIP != "192.0.2.4" {
		t.Errorf("web: podIP %q hostIP %q, want --node-ip's 192.0.2.4", w.PodIP, w.HostIP)
	}
	if w := byName["web-test"]; w.Phase != "Running" || w.Ready != "1/1" || len(w.Containers) != 1 ||
		!strings.HasPrefix(w.Containers[0].ContainerID, "containerd://") {
		t.Errorf("web: %+v", w)
	}
	if s := byName["app-with-sidecar-test"]; s.Phase != "Running" || s.Ready != "2/2" || len(s.Containers) != 2 {
		t.Errorf("sidecar pod: %+v", s)
	}
	for name, p := range byName {
		t.Logf("%s: last warning %q", name, p.LastWarning)
	}
}

func TestTable(t *testing.T) {
	var sb strings.Builder
	table(&sb, []PodReport{{Namespace: "default", Name: "crasher-n", Phase: "Running", Ready: "0/1", Restarts: 3, Reason: "flaky: CrashLoopBackOff",
		LastWarning: "BackOff: Back-off restarting failed container flaky"}})
	want := "POD                PHASE    READY  RESTARTS  REASON                   LAST WARNING\n" +
		"default/crasher-n  Running  0/1    3         flaky: CrashLoopBackOff  BackOff: Back-off restarting failed container flaky\n"
	if sb.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", sb.String(), want)
	}
}

func TestApplyMaxProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	if err := applyMaxProcs(-1); err == nil || !strings.Contains(err.Error(), "--max-procs") {
		t.Fatalf("-1: %v, want an error naming --max-procs", err)
	}
	if err := applyMaxProcs(0); err != nil || runtime.GOMAXPROCS(0) != before {
		t.Fatalf("0: %v, GOMAXPROCS %d, want Go's %d", err, runtime.GOMAXPROCS(0), before)
	}
	if err := applyMaxProcs(1); err != nil || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("1: %v, GOMAXPROCS %d", err, runtime.GOMAXPROCS(0))
	}
}

// --manifest-url adds the URL's pods to the shipped ones, sent with the
// --manifest-url-header headers.
func TestRunFakeWithManifestURL(t *testing.T) {
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("X-Token"))
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"remote"},
"spec":{"hostNetwork":true,"containers":[{"name":"c","image":"localhost/nodekit/busybox:1","command":["sleep","infinity"]}]}}`))
	}))
	defer srv.Close()
	root := t.TempDir()
	statusFile := filepath.Join(root, "status.json")
	o := options{root: root, nodeName: "test", duration: 3 * time.Second, statusFile: statusFile, manifestURL: srv.URL}
	if err := o.manifestURLHeaders.Set("X-Token: abc"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := run(ctx, o); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(statusFile)
	if err != nil {
		t.Fatal(err)
	}
	var pods []PodReport
	if err := json.Unmarshal(data, &pods); err != nil {
		t.Fatal(err)
	}
	var remote *PodReport
	for i := range pods {
		if pods[i].Name == "remote-test" {
			remote = &pods[i]
		}
	}
	if len(pods) != 5 || remote == nil || remote.Phase != "Running" {
		t.Fatalf("status file: %d pods, remote %+v; want 5 with remote-test Running", len(pods), remote)
	}
	if h, _ := got.Load().(string); h != "abc" {
		t.Errorf("X-Token header %q, want abc", h)
	}
}

func TestHeaderFlag(t *testing.T) {
	var f headerFlag
	for _, s := range []string{"A: 1", "A:2", "B:x:y"} {
		if err := f.Set(s); err != nil {
			t.Fatalf("Set(%q) = %v", s, err)
		}
	}
	if a, b := f.h.Values("A"), f.h.Get("B"); len(a) != 2 || a[0] != "1" || a[1] != "2" || b != "x:y" {
		t.Errorf("headers %v", f.h)
	}
	for _, bad := range []string{"novalue", ":v", " : v"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
}
