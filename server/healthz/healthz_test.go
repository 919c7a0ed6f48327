package healthz

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun: a Server alone serves /healthz on its port with the
// agent's checks.
func TestRun(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hzPort := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var stuck atomic.Bool
	stuck.Store(true)
	h, err := New(Config{Port: hzPort, Checks: Checks{SyncLoop: func() error {
		if stuck.Load() {
			return errors.New("stuck")
		}
		return nil
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Port: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad port: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	get := func() (int, string, error) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(hzPort) + "/healthz")
		if err != nil {
			return 0, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b), nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body, err := get()
		if err == nil {
			if code != http.StatusInternalServerError || !strings.Contains(body, "[-]syncloop failed") {
				t.Fatalf("healthz with a stuck loop: %d %q", code, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health port never came up: %v", err)
		}
		runtime.Gosched()
	}
	stuck.Store(false)
	if code, body, err := get(); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("healthz: %d %q %v", code, body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := h.Run(t.Context()); err == nil {
		t.Fatal("a second Run did not fail")
	}
}
