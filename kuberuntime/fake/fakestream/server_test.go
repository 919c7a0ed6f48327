package fakestream_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/exec"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/fake/fakestream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type streamEnv struct {
	rt        *fake.Runtime
	clock     *clocktesting.FakeClock
	srv       *fakestream.Server
	sandbox   string
	container string
	logFile   string
	stop      func() error
}

// startStreams runs a fake with a StreamServer on loopback and one pod
// whose container runs cmd.
func startStreams(t *testing.T, cfg fakestream.Config, cmd ...string) *streamEnv {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runtime, cfg.Listener, cfg.Clock = rt, lis, fc
	srv, err := fakestream.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stopped := false
	var runErr error
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	logDir := t.TempDir()
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "ns", Uid: "uid-1"},
		LogDirectory: logDir,
	}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  cmd,
		LogPath:  "app/0.log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(logDir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := rt.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return &streamEnv{rt: rt, clock: fc, srv: srv, sandbox: sb, container: id, logFile: filepath.Join(logDir, "app/0.log"), stop: stop}
}

func (e *streamEnv) execURL(t *testing.T, req *runtimeapi.ExecRequest) *url.URL {
	t.Helper()
	req.ContainerId = e.container
	resp, err := e.rt.Exec(context.Background(), req)
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	u, err := url.Parse(resp.GetUrl())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func exitCode(err error) int {
	var ee exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Exec sessions over SPDY (as a kubelet proxies kubectl's) and WebSocket
// (as kubectl 1.36 tries first), with client-go's own executors.
func TestStreamExec(t *testing.T) {
	e := startStreams(t, fakestream.Config{}, "sleep", "infinity")
	cases := []struct {
		name           string
		cmd            []string
		stdin          string
		stdout, stderr string
		code           int
	}{
		{"echo", []string{"echo", "hello", "world"}, "", "hello world\n", "", 0},
		{"cat copies stdin", []string{"cat"}, "line 1\nline 2\n", "line 1\nline 2\n", "", 0},
		{"exit code", []string{"sh", "-c", "exit 3"}, "", "", "", 3},
		{"script", []string{"sh", "-c", "echo out; echo err >&2; false && echo no; exit 7"}, "", "out\n", "err\n", 7},
		{"false", []string{"false"}, "", "", "", 1},
	}
	for _, proto := range []string{"spdy", "websocket"} {
		for _, tc := range cases {
			t.Run(proto+"/"+tc.name, func(t *testing.T) {
				u := e.execURL(t, &runtimeapi.ExecRequest{Cmd: tc.cmd, Stdin: tc.stdin != "", Stdout: true, Stderr: true})
				var ex remotecommand.Executor
				var err error
				if proto == "spdy" {
					ex, err = remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
				} else {
					ex, err = remotecommand.NewWebSocketExecutor(&rest.Config{}, "GET", u.String())
				}
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}
				if tc.stdin != "" {
					opts.Stdin = strings.NewReader(tc.stdin)
				}
				err = ex.StreamWithContext(context.Background(), opts)
				if got := exitCode(err); got != tc.code {
					t.Fatalf("exit code %d (err %v), want %d", got, err, tc.code)
				}
				if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
					t.Errorf("stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
				}
			})
		}
	}

	// A URL works once.
	u := e.execURL(t, &runtimeapi.ExecRequest{Cmd: []string{"true"}, Stdout: true})
	for i, want := range []bool{true, false} {
		ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
		if (err == nil) != want {
			t.Errorf("use %d of one URL: err = %v, want success %v", i+1, err, want)
		}
	}
}

func TestStreamExecHandlerAndErrors(t *testing.T) {
	e := startStreams(t, fakestream.Config{}, "sleep", "infinity")
	e.rt.SetExecHandler(func(id string, cmd []string) ([]byte, []byte, int32, error) {
		return []byte("scripted " + strings.Join(cmd, " ")), nil, 4, nil
	})
	u := e.execURL(t, &runtimeapi.ExecRequest{Cmd: []string{"anything"}, Stdout: true})
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &out})
	if exitCode(err) != 4 || out.String() != "scripted anything" {
		t.Errorf("handler exec: code %d out %q, want 4 and %q", exitCode(err), out.String(), "scripted anything")
	}

	ctx := context.Background()
	for name, req := range map[string]*runtimeapi.ExecRequest{
		"no streams":   {ContainerId: e.container, Cmd: []string{"true"}},
		"tty + stderr": {ContainerId: e.container, Cmd: []string{"true"}, Tty: true, Stdout: true, Stderr: true},
		"no command":   {ContainerId: e.container, Stdout: true},
		"unknown":      {ContainerId: "nope", Cmd: []string{"true"}, Stdout: true},
	} {
		if _, err := e.rt.Exec(ctx, req); err == nil {
			t.Errorf("%s: Exec succeeded", name)
		}
	}
	if _, err := e.rt.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: e.sandbox, Port: []int32{70000}}); !errors.Is(err, fake.ErrInvalidArgument) {
		t.Errorf("PortForward to port 70000: %v", err)
	}
}

func TestStreamUnimplementedWithoutServer(t *testing.T) {
	rt, err := fake.New(fake.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: "x", Cmd: []string{"true"}, Stdout: true}); !errors.Is(err, fake.ErrUnimplemented) {
		t.Fatalf("Exec without a StreamServer: %v, want ErrUnimplemented", err)
	}
	if _, err := fakestream.New(fakestream.Config{}); !errors.Is(err, fake.ErrInvalidConfig) {
		t.Fatalf("NewStreamServer without Runtime and Listener: %v", err)
	}
}

// Attach streams what the container prints (AppendLog) until it exits; a
// `cat` container echoes the attached stdin. AppendLog writes CRI log lines.
func TestStreamAttachAndAppendLog(t *testing.T) {
	e := startStreams(t, fakestream.Config{}, "cat")
	resp, err := e.rt.Attach(context.Background(), &runtimeapi.AttachRequest{ContainerId: e.container, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.GetUrl())
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: errW})
		outW.Close()
		errW.Close()
	}()
	readN := func(r io.Reader, n int) string {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("read: %v", err)
		}
		return string(b)
	}
	if _, err := inW.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if got := readN(outR, 6); got != "hello\n" {
		t.Fatalf("echoed stdin = %q", got)
	}
	if err := e.rt.AppendLog(e.container, "stderr", "oops\n"); err != nil {
		t.Fatal(err)
	}
	if got := readN(errR, 5); got != "oops\n" {
		t.Fatalf("stderr = %q", got)
	}
	if err := e.rt.ExitContainer(e.container, 0, ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("attach ended with %v, want nil after the container exited", err)
	}
	inW.Close()
	b, err := os.ReadFile(e.logFile)
	if err != nil {
		t.Fatal(err)
	}
	want := "2026-01-01T00:00:00Z stdout F hello\n2026-01-01T00:00:00Z stderr F oops\n"
	if string(b) != want {
		t.Errorf("log file = %q, want %q", b, want)
	}
	if err := e.rt.AppendLog(e.container, "stdin", "x"); !errors.Is(err, fake.ErrInvalidArgument) {
		t.Errorf("AppendLog to stdin: %v", err)
	}
}

// dialPortForward opens a SPDY port-forward connection as client-go's
// port forwarder does.
func dialPortForward(t *testing.T, e *streamEnv) (func(port string) (data, errStream io.ReadWriteCloser), func()) {
	t.Helper()
	resp, err := e.rt.PortForward(context.Background(), &runtimeapi.PortForwardRequest{PodSandboxId: e.sandbox, Port: []int32{8080}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.GetUrl())
	tr, up, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	conn, proto, err := spdy.NewDialer(up, &http.Client{Transport: tr}, "POST", u).Dial("portforward.k8s.io")
	if err != nil {
		t.Fatal(err)
	}
	if proto != "portforward.k8s.io" {
		t.Fatalf("protocol %q", proto)
	}
	n := 0
	open := func(port string) (io.ReadWriteCloser, io.ReadWriteCloser) {
		n++
		h := http.Header{}
		h.Set(v1.StreamType, v1.StreamTypeError)
		h.Set(v1.PortHeader, port)
		h.Set(v1.PortForwardRequestIDHeader, string(rune('0'+n)))
		es, err := conn.CreateStream(h)
		if err != nil {
			t.Fatal(err)
		}
		_ = es.Close() // the client only reads the error stream
		h.Set(v1.StreamType, v1.StreamTypeData)
		ds, err := conn.CreateStream(h)
		if err != nil {
			t.Fatal(err)
		}
		return ds, es
	}
	return open, func() { conn.Close() }
}

func TestStreamPortForward(t *testing.T) {
	failing := errors.New("connection refused")
	e := startStreams(t, fakestream.Config{PortForward: func(ctx context.Context, sandboxID string, port int32, conn io.ReadWriter) error {
		if port == 81 {
			return failing
		}
		_, err := io.Copy(conn, io.TeeReader(strings.NewReader(sandboxID[:8]+":"), io.Discard))
		if err != nil {
			return err
		}
		_, err = io.Copy(conn, conn)
		return err
	}}, "sleep", "infinity")
	open, closeConn := dialPortForward(t, e)
	defer closeConn()

	data, errs := open("80")
	if _, err := data.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = data.Close()
	got, err := io.ReadAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.sandbox[:8] + ":ping"; string(got) != want {
		t.Errorf("port 80 answered %q, want %q", got, want)
	}
	if msg, _ := io.ReadAll(errs); len(msg) != 0 {
		t.Errorf("port 80 error stream: %q", msg)
	}

	data, errs = open("81")
	msg, _ := io.ReadAll(errs)
	if !strings.Contains(string(msg), "connection refused") || !strings.Contains(string(msg), "81") {
		t.Errorf("port 81 error stream = %q, want the forwarder's error", msg)
	}
	_ = data.Close()
}

func TestStreamPortForwardEchoByDefault(t *testing.T) {
	e := startStreams(t, fakestream.Config{}, "sleep", "infinity")
	open, closeConn := dialPortForward(t, e)
	defer closeConn()
	for i := range 3 { // several connections on one session
		data, _ := open("8080")
		msg := []byte(strings.Repeat("x", 1000*(i+1)))
		if _, err := data.Write(msg); err != nil {
			t.Fatal(err)
		}
		_ = data.Close()
		got, err := io.ReadAll(data)
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo %d: %d bytes back (err %v), want %d", i, len(got), err, len(msg))
		}
	}
}

// Stopping the server ends the sessions in progress and leaks nothing
// (TestMain runs goleak); Run runs once.
func TestStreamServerStopEndsSessions(t *testing.T) {
	e := startStreams(t, fakestream.Config{}, "cat")
	resp, err := e.rt.Attach(context.Background(), &runtimeapi.AttachRequest{ContainerId: e.container, Stdin: true, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.GetUrl())
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	defer inW.Close()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: inR, Stdout: outW})
		outW.Close()
	}()
	// The session is up once the cat container echoes.
	if _, err := inW.Write([]byte("up\n")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 3)
	if _, err := io.ReadFull(outR, b); err != nil || string(b) != "up\n" {
		t.Fatalf("attach output %q, %v", b, err)
	}
	if err := e.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	<-done // the client sees its session end
	if err := e.srv.Run(context.Background()); !errors.Is(err, fakestream.ErrAlreadyRan) {
		t.Errorf("second Run: %v, want ErrAlreadyRan", err)
	}
	if _, err := e.rt.Exec(context.Background(), &runtimeapi.ExecRequest{ContainerId: e.container, Cmd: []string{"true"}, Stdout: true}); !errors.Is(err, fakestream.ErrStopped) || status.Code(err) != codes.Unavailable {
		t.Errorf("Exec after the server stopped: %v, want ErrStopped with code Unavailable", err)
	}
}
