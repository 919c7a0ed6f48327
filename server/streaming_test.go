package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
)

// echoBackend stands in for the CRI streaming server: it answers an
// upgrade with 101 and echoes what it reads.
type echoBackend struct {
	*httptest.Server
	mu       sync.Mutex
	paths    []string
	upgrades []string
}

func newEchoBackend(t *testing.T) *echoBackend {
	b := &echoBackend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.paths = append(b.paths, r.URL.Path)
		b.upgrades = append(b.upgrades, r.Header.Get("Upgrade"))
		b.mu.Unlock()
		conn, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", r.Header.Get("Upgrade"))
		_ = rw.Flush()
		_, _ = io.Copy(conn, rw)
	}))
	t.Cleanup(b.Close)
	return b
}

// upgrade sends an upgrading request to addr and returns the connection
// and the response.
func upgrade(t *testing.T, addr, method, target, proto string, extra ...string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: node\r\nX-User: admin\r\nConnection: Upgrade\r\nUpgrade: %s\r\n", method, target, proto)
	for _, h := range extra {
		req += h + "\r\n"
	}
	if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

func echo(t *testing.T, conn net.Conn, br *bufio.Reader, msg string) {
	t.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(br, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
}

func serveFixture(t *testing.T, edit func(*Config)) (*fixture, *echoBackend, *httptest.Server) {
	f := newFixture(t, edit)
	b := newEchoBackend(t)
	f.streaming.url = b.URL
	front := httptest.NewServer(f.srv.Handler())
	t.Cleanup(front.Close)
	return f, b, front
}

func TestExecProxiesToTheRuntimeStream(t *testing.T) {
	f, b, front := serveFixture(t, nil)
	addr := strings.TrimPrefix(front.URL, "http://")
	for _, c := range []struct{ method, query, proto string }{
		{"POST", "command=sh&command=-c&command=echo+hi&input=1&output=1&error=1", "SPDY/3.1"},
		{"GET", "command=cat&input=1&output=1&tty=1&error=1", "websocket"},
	} {
		conn, br, resp := upgrade(t, addr, c.method, "/exec/default/web/app?"+c.query, c.proto)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("%s: status %d", c.query, resp.StatusCode)
		}
		echo(t, conn, br, "ping-"+c.proto)
		conn.Close()
	}
	want := [][]string{{"sh", "-c", "echo hi"}, {"cat"}}
	for i, r := range f.streaming.execs {
		if r.ContainerId != "ctr-app" || !reflect.DeepEqual(r.Cmd, want[i]) || !r.Stdin || !r.Stdout {
			t.Errorf("exec %d: %+v", i, r)
		}
	}
	if e := f.streaming.execs; len(e) != 2 || !e[0].Stderr || e[0].Tty || !e[1].Tty || e[1].Stderr {
		t.Errorf("stream flags %+v", e)
	}
	if !reflect.DeepEqual(b.paths, []string{"/exec/tok", "/exec/tok"}) || !reflect.DeepEqual(b.upgrades, []string{"SPDY/3.1", "websocket"}) {
		t.Errorf("backend saw %v %v", b.paths, b.upgrades)
	}
}

func TestAttachAndUIDPaths(t *testing.T) {
	f, b, front := serveFixture(t, nil)
	addr := strings.TrimPrefix(front.URL, "http://")
	conn, br, resp := upgrade(t, addr, "POST", "/attach/default/web/uid-1/app?input=1&output=1", "SPDY/3.1")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	echo(t, conn, br, "attached")
	if len(f.streaming.attach) != 1 || f.streaming.attach[0].ContainerId != "ctr-app" || !f.streaming.attach[0].Stdin {
		t.Errorf("attach %+v", f.streaming.attach)
	}
	if b.paths[0] != "/attach/tok" {
		t.Errorf("backend path %v", b.paths)
	}
}

func TestStreamRefusals(t *testing.T) {
	for _, c := range []struct {
		target string
		edit   func(*fixture)
		code   int
	}{
		{"/exec/default/web/app?command=ls", nil, http.StatusBadRequest}, // no stream
		{"/exec/default/web/app?output=1", nil, http.StatusBadRequest},   // no command
		{"/exec/default/web/..%2fapp?command=ls&output=1", nil, http.StatusBadRequest},
		{"/exec/default/nope/app?command=ls&output=1", nil, http.StatusNotFound},
		{"/exec/default/web/uid-2/app?command=ls&output=1", nil, http.StatusNotFound},
		{"/exec/default/web/init?command=ls&output=1", nil, http.StatusNotFound}, // not running
		{"/exec/default/web/app?command=ls&output=1", func(f *fixture) {
			f.streaming.err = status.Error(codes.NotFound, "container gone")
		}, http.StatusNotFound},
		{"/exec/default/web/app?command=ls&output=1", func(f *fixture) {
			f.streaming.err = status.Error(codes.Unavailable, "runtime down")
		}, http.StatusInternalServerError},
		{"/attach/default/web/app", nil, http.StatusBadRequest},
		{"/portForward/default/nope", nil, http.StatusNotFound},
		{"/portForward/default/web/uid-2", nil, http.StatusNotFound},
		{"/run/default/web/nope?cmd=ls", nil, http.StatusInternalServerError},
	} {
		f := newFixture(t, nil)
		if c.edit != nil {
			c.edit(f)
		}
		w := f.do(t, "POST", c.target, "admin")
		if w.Code != c.code {
			t.Errorf("%s: status %d, want %d (%q)", c.target, w.Code, c.code, w.Body.String())
		}
	}
	// Without a streaming runtime: 501.
	f := newFixture(t, func(c *Config) { c.Streaming, c.Runner = nil, nil })
	for _, p := range []string{"/exec/default/web/app?command=ls&output=1", "/attach/default/web/app?output=1", "/portForward/default/web", "/run/default/web/app?cmd=ls"} {
		wantCode(t, f.do(t, "POST", p, "admin"), http.StatusNotImplemented)
	}
	// exec is the proxy subresource.
	f = newFixture(t, nil)
	f.authz.grants["u/pods"] = true
	wantCode(t, f.do(t, "POST", "/exec/default/web/app?command=ls&output=1", "u"), http.StatusForbidden)
}

func TestStreamCreationTimeout(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.StreamCreationTimeout = time.Millisecond })
	f.srv.cfg.Streaming = blockingStreaming{f.streaming}
	w := f.do(t, "POST", "/exec/default/web/app?command=ls&output=1", "admin")
	wantCode(t, w, http.StatusGatewayTimeout)
}

type blockingStreaming struct{ *fakeStreaming }

func (b blockingStreaming) Exec(ctx context.Context, _ *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestPortForward(t *testing.T) {
	f, b, front := serveFixture(t, nil)
	addr := strings.TrimPrefix(front.URL, "http://")
	// SPDY: ports come per stream, none in the request.
	conn, br, resp := upgrade(t, addr, "POST", "/portForward/default/web", "SPDY/3.1")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	echo(t, conn, br, "tcp bytes")
	// WebSocket: ports in the query.
	conn, br, resp = upgrade(t, addr, "GET", "/portForward/default/web/uid-1?port=8080&port=53", "websocket",
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	echo(t, conn, br, "ws bytes")
	if len(f.streaming.pfs) != 2 || f.streaming.pfs[0].PodSandboxId != "sb-1" || len(f.streaming.pfs[0].Port) != 0 ||
		!reflect.DeepEqual(f.streaming.pfs[1].Port, []int32{8080, 53}) {
		t.Errorf("port-forward requests %+v", f.streaming.pfs)
	}
	if b.paths[0] != "/portforward/tok" {
		t.Errorf("backend path %v", b.paths)
	}
	for _, q := range []string{"port=0", "port=70000", "port=x", ""} {
		r := httptest.NewRequest("GET", "/portForward/default/web?"+q, nil)
		r.Header.Set("X-User", "admin")
		r.Header.Set("Connection", "Upgrade")
		r.Header.Set("Upgrade", "websocket")
		w := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(w, r)
		wantCode(t, w, http.StatusBadRequest)
	}
}

func TestRun(t *testing.T) {
	f := newFixture(t, nil)
	w := f.do(t, "POST", "/run/default/web/app?cmd=ls%20-l%20/", "admin")
	wantCode(t, w, http.StatusOK)
	if w.Body.String() != "out\nerr\n" || f.runner.id != "ctr-app" || !reflect.DeepEqual(f.runner.cmd, []string{"ls", "-l", "/"}) {
		t.Errorf("run: body %q id %q cmd %q", w.Body.String(), f.runner.id, f.runner.cmd)
	}
	wantCode(t, f.do(t, "GET", "/run/default/web/app?cmd=ls", "admin"), http.StatusMethodNotAllowed)
	f.runner.err = fmt.Errorf("command exited 3")
	wantCode(t, f.do(t, "POST", "/run/default/web/uid-1/app?cmd=false", "admin"), http.StatusInternalServerError)
}

func TestStreamIdleTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	_, _, front := serveFixture(t, func(c *Config) { c.Clock = clk; c.StreamingIdleTimeout = time.Minute })
	conn, br, resp := upgrade(t, strings.TrimPrefix(front.URL, "http://"), "POST", "/exec/default/web/app?command=sh&output=1&input=1", "SPDY/3.1")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	echo(t, conn, br, "a")
	clk.Step(50 * time.Second)
	echo(t, conn, br, "b") // traffic: the idle time starts again
	clk.Step(50 * time.Second)
	echo(t, conn, br, "c")
	clk.Step(61 * time.Second)
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("stream still open after the idle timeout")
	}
}

func TestMaxStreams(t *testing.T) {
	_, _, front := serveFixture(t, func(c *Config) { c.MaxStreams = 1 })
	addr := strings.TrimPrefix(front.URL, "http://")
	conn, br, resp := upgrade(t, addr, "POST", "/exec/default/web/app?command=sh&output=1", "SPDY/3.1")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", resp.StatusCode)
	}
	echo(t, conn, br, "held")
	_, _, resp = upgrade(t, addr, "POST", "/exec/default/web/app?command=sh&output=1", "SPDY/3.1")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second stream: status %d, want 429", resp.StatusCode)
	}
}
