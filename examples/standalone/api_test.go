package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit"
)

// TestHealthzByDefault: the agent serves /healthz on the health port with
// its sync loop and PLEG checks; --port without a client CA is refused.
func TestHealthzByDefault(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	f := apiFlags{healthzPort: port, healthzAddress: "127.0.0.1"}
	b := nodekit.NewBuilder().WithNodeName("n1").WithFakeRuntime().WithRootDir(t.TempDir())
	if err := f.wire(b, "n1", t.TempDir()); err != nil {
		t.Fatal(err)
	}
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
			t.Errorf("Run: %v", err)
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz?verbose")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = string(body)
			if resp.StatusCode == http.StatusOK && strings.Contains(last, "[+]syncloop ok") && strings.Contains(last, "[+]pleg ok") {
				break
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz never passed: %s", last)
		}
		runtime.Gosched()
	}
	if err := (&apiFlags{port: 10250}).wire(nodekit.NewBuilder(), "n1", t.TempDir()); err == nil {
		t.Error("--port accepted without a client CA (or without the nodeapi tag)")
	}
}
