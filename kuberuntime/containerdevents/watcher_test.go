package containerdevents

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)

func nop(context.Context, Event) {}

func TestNewValidates(t *testing.T) {
	for name, cfg := range map[string]Config{
		"Endpoint or Conn": {Handler: nop},
		"scheme":           {Endpoint: "tcp://1.2.3.4:5", Handler: nop},
		"absolute":         {Endpoint: "unix://run/x.sock", Handler: nop},
		"longer":           {Endpoint: "/" + strings.Repeat("x", 200), Handler: nop},
		"Handler":          {Endpoint: "/run/c.sock"},
		"Namespace":        {Endpoint: "/run/c.sock", Handler: nop, Namespace: `a"b`},
		"negative":         {Endpoint: "/run/c.sock", Handler: nop, MinBackoff: -1},
		"below MinBackoff": {Endpoint: "/run/c.sock", Handler: nop, MinBackoff: time.Minute, MaxBackoff: time.Second},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	w, err := New(Config{Endpoint: "/run/c.sock", Handler: nop})
	if err != nil {
		t.Fatal(err)
	}
	if w.cfg.Namespace != "k8s.io" || w.cfg.MinBackoff != DefaultMinBackoff || w.cfg.MaxBackoff != DefaultMaxBackoff || w.target != "unix:///run/c.sock" {
		t.Fatalf("defaults: %+v target %s", w.cfg, w.target)
	}
}

// recorder collects events on a channel.
type recorder chan Event

func (r recorder) handle(_ context.Context, ev Event) { r <- ev }

func (r recorder) next(t *testing.T) Event {
	t.Helper()
	select {
	case ev := <-r:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return Event{}
	}
}

type run struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, w *Watcher) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	r := &run{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *run) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of the cancel")
		return nil
	}
}

func TestDeliversExitsAndOOMsIgnoresTheRest(t *testing.T) {
	srv := newServer(t, true)
	rec := make(recorder, 100)
	core, logs := observer.New(zap.DebugLevel)
	w, err := New(Config{Endpoint: srv.Endpoint, Handler: rec.handle, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, w)
	if ev := rec.next(t); ev.Type != Subscribed || ev.Attempt != 1 || ev.Namespace != "k8s.io" {
		t.Fatalf("first event %+v, want Subscribed attempt 1", ev)
	}
	<-srv.Opened()
	if got, want := srv.Filters(), [][]string{{`namespace=="k8s.io",topic=="/tasks/exit"`, `namespace=="k8s.io",topic=="/tasks/oom"`}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("filters %q, want %q", got, want)
	}

	fin := epoch.Add(time.Second)
	for _, m := range [][]byte{
		Envelope(epoch, "k8s.io", TopicOOM, "containerd.events.TaskOOM", TaskOOM("c1")),
		// The exit of an exec process in c1: not the container's.
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", TaskExit("c1", "exec-1", 8, 1, fin)),
		Envelope(epoch, "default", TopicExit, "containerd.events.TaskExit", TaskExit("x", "x", 9, 0, fin)),
		Envelope(epoch, "k8s.io", "/tasks/start", "containerd.events.TaskStart", TaskOOM("c1")),
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.Unknown", TaskOOM("c1")),
		{0xff, 0xff}, // not a message
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", []byte{0x0a, 0x10, 'a'}), // truncated
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", TaskExit("", "", 1, 0, fin)),
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", []byte{0x18, 0x01, 0x22, 0x00}), // pid as... exit_status with the wrong wire type
		// The container's own exit, with a type URL prefix.
		Envelope(epoch.Add(2*time.Second), "k8s.io", TopicExit, "type.googleapis.com/containerd.events.TaskExit", TaskExit("c1", "c1", 7, 137, fin)),
		// An exit without exited_at takes the envelope's time.
		Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", TaskExit("c2", "", 10, 2, time.Time{})),
	} {
		srv.Send(m)
	}
	want := []Event{
		{Type: OOM, Namespace: "k8s.io", ContainerID: "c1", Published: epoch},
		{Type: Exit, Namespace: "k8s.io", ContainerID: "c1", Pid: 7, ExitCode: 137, FinishedAt: fin, OOMKilled: true, Published: epoch.Add(2 * time.Second)},
		{Type: Exit, Namespace: "k8s.io", ContainerID: "c2", Pid: 10, ExitCode: 2, FinishedAt: epoch, Published: epoch},
	}
	for i, w := range want {
		got := rec.next(t)
		if !got.FinishedAt.Equal(w.FinishedAt) || !got.Published.Equal(w.Published) {
			t.Fatalf("event %d: times %v %v, want %v %v", i, got.FinishedAt, got.Published, w.FinishedAt, w.Published)
		}
		got.FinishedAt, got.Published, w.FinishedAt, w.Published = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if got != w {
			t.Fatalf("event %d:\n got  %+v\n want %+v", i, got, w)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if s := w.Stats(); s.Streams != 1 || s.Delivered != 3 || s.Ignored != 8 {
		t.Fatalf("stats %+v, want 1 stream, 3 delivered, 8 ignored", s)
	}
	if n := logs.FilterMessage("ignoring containerd event").Len(); n != 4 {
		t.Fatalf("%d malformed events logged, want 4: %v", n, logs.All())
	}
	select {
	case ev := <-rec:
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// waitTimer waits until the watcher waits on the fake clock.
func waitTimer(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !clk.HasWaiters() {
		select {
		case <-deadline:
			t.Fatal("the watcher never waited to reconnect")
		case <-time.After(time.Millisecond):
		}
	}
}

func TestReconnectsWithBackoff(t *testing.T) {
	srv := newServer(t, true)
	clk := clocktesting.NewFakeClock(epoch)
	rec := make(recorder, 100)
	w, err := New(Config{Endpoint: srv.Endpoint, Handler: rec.handle, Clock: clk, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	if ev := rec.next(t); ev.Type != Subscribed || ev.Attempt != 1 {
		t.Fatalf("got %+v", ev)
	}
	<-srv.Opened()

	// Two failures in a row without events: 1s, then 2s.
	for i, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		srv.End(status.Error(codes.Unavailable, "containerd restarting"))
		waitTimer(t, clk)
		clk.Step(backoff - time.Nanosecond)
		select {
		case <-srv.Opened():
			t.Fatalf("failure %d: reconnected before the %v back-off", i+1, backoff)
		case <-time.After(50 * time.Millisecond):
		}
		clk.Step(time.Nanosecond)
		<-srv.Opened()
		if ev := rec.next(t); ev.Type != Subscribed || ev.Attempt != i+2 {
			t.Fatalf("after failure %d: %+v", i+1, ev)
		}
	}
	// A stream that delivered an event resets the back-off.
	srv.Send(Envelope(epoch, "k8s.io", TopicOOM, "containerd.events.TaskOOM", TaskOOM("c9")))
	if ev := rec.next(t); ev.Type != OOM || ev.ContainerID != "c9" {
		t.Fatalf("got %+v", ev)
	}
	srv.End(errTestEnd)
	waitTimer(t, clk)
	clk.Step(time.Second)
	<-srv.Opened()
	if ev := rec.next(t); ev.Type != Subscribed || ev.Attempt != 4 {
		t.Fatalf("got %+v", ev)
	}
	if s := w.Stats(); s.Streams != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUnimplementedIsUnsupported(t *testing.T) {
	srv := newServer(t, false)
	w, err := New(Config{Endpoint: srv.Endpoint, Handler: nop})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(t.Context()); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Run on a server without the event service: %v", err)
	}
}

func TestCancelWhileWaitingToReconnect(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	w, err := New(Config{Endpoint: filepath.Join(t.TempDir(), "none.sock"), Handler: nop, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	r := start(t, w)
	waitTimer(t, clk) // no socket: the stream failed and the watcher waits
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestAlreadyRunning(t *testing.T) {
	srv := newServer(t, true)
	rec := make(recorder, 10)
	w, err := New(Config{Endpoint: srv.Endpoint, Handler: rec.handle})
	if err != nil {
		t.Fatal(err)
	}
	start(t, w)
	rec.next(t)
	if err := w.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run: %v", err)
	}
}

func TestOOMMemoryIsBounded(t *testing.T) {
	w, err := New(Config{Endpoint: "/run/c.sock", Handler: nop, OOMMemory: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		w.rememberOOM(id)
	}
	if len(w.oom) != 2 || len(w.oomOrder) > 4 {
		t.Fatalf("oom memory %v order %v", w.oom, w.oomOrder)
	}
	if _, ok := w.oom["g"]; !ok {
		t.Fatal("the newest OOM was forgotten")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Envelope(epoch, "k8s.io", TopicExit, "containerd.events.TaskExit", TaskExit("c", "c", 1, 2, epoch)))
	f.Add(Envelope(epoch, "k8s.io", TopicOOM, "containerd.events.TaskOOM", TaskOOM("c")))
	f.Add([]byte{0x0a, 0x02, 0x08, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := New(Config{Endpoint: "/run/c.sock", Handler: nop})
		if err != nil {
			t.Fatal(err)
		}
		ev, err := w.decode(b)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		if ev.Type != "" && ev.ContainerID == "" {
			t.Fatalf("event without a container id: %+v", ev)
		}
	})
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{Endpoint: "tcp://x", Namespace: "a\"b", MinBackoff: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Endpoint", "Handler", "Namespace", "MinBackoff"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}
