package checkpoint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	ckpt "github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/kubetypes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "c", Image: "img"}}},
	}
}

func names(pods []*v1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"/"+string(p.UID))
	}
	return strings.Join(out, ",")
}

func t0() time.Time { return time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC) }

type harness struct {
	src   *Source
	out   chan kubetypes.PodUpdate
	clock *clocktesting.FakeClock
	logs  *observer.ObservedLogs
	stop  func()
}

// run starts a wrapper on dir with Run in a goroutine.
func run(t *testing.T, dir string, replayAfter time.Duration) *harness {
	t.Helper()
	h := newHarness(t, dir, replayAfter, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.src.Run(ctx) }()
	stopped := false
	h.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
		}
	}
	t.Cleanup(h.stop)
	return h
}

func newHarness(t *testing.T, dir string, replayAfter time.Duration, fsys ckpt.FS) *harness {
	t.Helper()
	core, logs := observer.New(zapcore.DebugLevel)
	h := &harness{out: make(chan kubetypes.PodUpdate, 10), clock: clocktesting.NewFakeClock(t0()), logs: logs}
	src, err := New(Config{Dir: dir, Source: kubetypes.SourceHTTP, Out: h.out, ReplayAfter: replayAfter, Clock: h.clock, Logger: zap.New(core), FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	h.src = src
	return h
}

func (h *harness) recv(t *testing.T) kubetypes.PodUpdate {
	t.Helper()
	select {
	case u := <-h.out:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update within 30s")
		return kubetypes.PodUpdate{}
	}
}

func (h *harness) expectNone(t *testing.T) {
	t.Helper()
	select {
	case u := <-h.out:
		t.Fatalf("unexpected update %v %s", u.Op, names(u.Pods))
	default:
	}
}

// waitTimer waits until Run has created its replay timer.
func (h *harness) waitTimer() {
	for !h.clock.HasWaiters() {
		runtime.Gosched()
	}
}

// send hands u to the wrapper's In and waits for the forwarded copy.
func (h *harness) send(t *testing.T, u kubetypes.PodUpdate) kubetypes.PodUpdate {
	t.Helper()
	h.src.In() <- u
	return h.recv(t)
}

func TestRestartWithSourceDownReplays(t *testing.T) {
	dir := t.TempDir()
	h := run(t, dir, -1)
	// Nothing persisted yet: an immediate replay sends nothing.
	got := h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Source: "whatever", Pods: []*v1.Pod{pod("a"), pod("b")}})
	if got.Op != kubetypes.SET || got.Source != kubetypes.SourceHTTP || names(got.Pods) != "a/uid-a,b/uid-b" {
		t.Fatalf("forwarded %v/%s %s", got.Op, got.Source, names(got.Pods))
	}
	h.stop()
	if _, err := os.Stat(filepath.Join(dir, h.src.FileName())); err != nil {
		t.Fatalf("no checkpoint file: %v", err)
	}

	// "Reboot" without network: a new wrapper on the same dir replays.
	h2 := run(t, dir, -1)
	u := h2.recv(t)
	if u.Op != kubetypes.SET || u.Source != kubetypes.SourceHTTP || names(u.Pods) != "a/uid-a,b/uid-b" {
		t.Fatalf("replayed %v/%s %s", u.Op, u.Source, names(u.Pods))
	}
	if u.Pods[0].Spec.NodeName != "node1" || u.Pods[0].Spec.Containers[0].Image != "img" {
		t.Fatalf("replayed pod lost its spec: %+v", u.Pods[0].Spec)
	}
	// The live source comes back with other pods: its SET is forwarded.
	if got := h2.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("c")}}); names(got.Pods) != "c/uid-c" {
		t.Fatalf("live after replay = %s", names(got.Pods))
	}
	h2.stop()
	h2.expectNone(t)

	// And the next reboot replays the newer set.
	h3 := run(t, dir, -1)
	if u := h3.recv(t); names(u.Pods) != "c/uid-c" {
		t.Fatalf("third start replayed %s", names(u.Pods))
	}
}

func TestReplayWaitsReplayAfter(t *testing.T) {
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("a")); err != nil {
		t.Fatal(err)
	}
	h := run(t, dir, 0) // default
	h.waitTimer()
	h.clock.Step(DefaultReplayAfter - time.Millisecond)
	h.expectNone(t)
	h.clock.Step(time.Millisecond)
	if u := h.recv(t); names(u.Pods) != "a/uid-a" {
		t.Fatalf("replayed %s", names(u.Pods))
	}
	// The live source's first SET follows the replay and wins.
	if got := h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{}}); len(got.Pods) != 0 {
		t.Fatalf("live = %s", names(got.Pods))
	}
	// Replay is once only.
	if sent, err := h.src.Replay(t.Context()); sent || err != nil {
		t.Fatalf("second Replay = %v, %v", sent, err)
	}
}

// TestLiveBeforeReplayWins: the source delivers before ReplayAfter; the
// persisted (older) set is never sent.
func TestLiveBeforeReplayWins(t *testing.T) {
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("old")); err != nil {
		t.Fatal(err)
	}
	h := run(t, dir, 10*time.Second)
	h.waitTimer()
	if got := h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("new")}}); names(got.Pods) != "new/uid-new" {
		t.Fatalf("live = %s", names(got.Pods))
	}
	h.clock.Step(time.Minute)
	// Whenever Run handles the fired timer, before or after this second
	// live update, it must not replay.
	if got := h.send(t, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("new"), pod("x")}}); names(got.Pods) != "new/uid-new,x/uid-x" {
		t.Fatalf("second live = %s", names(got.Pods))
	}
	h.expectNone(t)
	if sent, err := h.src.Replay(t.Context()); sent || err != nil {
		t.Fatalf("Replay after live data = %v, %v", sent, err)
	}
	h.expectNone(t)
}

func ckptWrite(dir string, pods ...*v1.Pod) error {
	s, err := New(Config{Dir: dir, Source: kubetypes.SourceHTTP, Out: make(chan kubetypes.PodUpdate)})
	if err != nil {
		return err
	}
	return s.persist(pods)
}

func TestCorruptFileSetAsideAndStartsEmpty(t *testing.T) {
	cases := map[string]func(path string) error{
		"garbage": func(p string) error { return os.WriteFile(p, []byte("not a checkpoint"), 0o600) },
		"truncated": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, b[:len(b)-5], 0o600)
		},
		"flipped bit": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x10
			return os.WriteFile(p, b, 0o600)
		},
		"valid checksum, not a PodList": func(p string) error {
			return ckpt.Write(filepath.Dir(p), filepath.Base(p), []byte(`{"kind":"Secret"}`))
		},
		"valid checksum, not JSON": func(p string) error {
			return ckpt.Write(filepath.Dir(p), filepath.Base(p), []byte(`{{{`))
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := ckptWrite(dir, pod("a")); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, dir, -1, nil)
			path := filepath.Join(dir, h.src.FileName())
			if err := damage(path); err != nil {
				t.Fatal(err)
			}
			sent, err := h.src.Replay(t.Context())
			if sent || err != nil {
				t.Fatalf("Replay = %v, %v; want false, nil", sent, err)
			}
			h.expectNone(t)
			if _, err := os.Stat(path + ".corrupt"); err != nil {
				t.Fatalf("not set aside: %v", err)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("corrupt file still in place: %v", err)
			}
			if h.logs.FilterMessageSnippet("set aside").FilterLevelExact(zapcore.WarnLevel).Len() != 1 {
				t.Fatalf("no warning logged: %v", h.logs.All())
			}
			// The source works normally afterwards.
			if err := h.src.Handle(t.Context(), kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("b")}}); err != nil {
				t.Fatal(err)
			}
			h.recv(t)
			h2 := newHarness(t, dir, -1, nil)
			if sent, err := h2.src.Replay(t.Context()); !sent || err != nil {
				t.Fatalf("Replay after recovery = %v, %v", sent, err)
			}
			if u := h2.recv(t); names(u.Pods) != "b/uid-b" {
				t.Fatalf("replayed %s", names(u.Pods))
			}
		})
	}
}

func TestMissingFileReplaysNothing(t *testing.T) {
	h := newHarness(t, filepath.Join(t.TempDir(), "absent"), -1, nil)
	if sent, err := h.src.Replay(t.Context()); sent || err != nil {
		t.Fatalf("Replay = %v, %v", sent, err)
	}
	h.expectNone(t)
}

// failingFS fails every rename: the new set cannot be committed.
type failingFS struct{ ckpt.OS }

func (failingFS) Rename(string, string) error { return errors.New("disk on fire") }

func TestWriteFailureStillForwardsAndKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("old")); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dir, -1, failingFS{})
	err := h.src.Handle(t.Context(), kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{pod("new")}})
	if !errors.Is(err, ErrPersist) {
		t.Fatalf("Handle = %v, want ErrPersist", err)
	}
	if u := h.recv(t); names(u.Pods) != "new/uid-new" {
		t.Fatalf("forwarded %s", names(u.Pods))
	}
	h2 := newHarness(t, dir, -1, nil)
	if _, err := h2.src.Replay(t.Context()); err != nil {
		t.Fatal(err)
	}
	if u := h2.recv(t); names(u.Pods) != "old/uid-old" {
		t.Fatalf("after failed write the file holds %s, want the old set", names(u.Pods))
	}
}

func TestIncrementalOpsPersistTheSet(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, -1, nil)
	ctx := t.Context()
	b2 := pod("b")
	b2.Spec.Containers[0].Image = "img:2"
	for _, u := range []kubetypes.PodUpdate{
		{Op: kubetypes.SET, Pods: []*v1.Pod{pod("a")}},
		{Op: kubetypes.ADD, Pods: []*v1.Pod{pod("b"), pod("c")}},
		{Op: kubetypes.UPDATE, Pods: []*v1.Pod{b2}},
		{Op: kubetypes.REMOVE, Pods: []*v1.Pod{pod("a")}},
	} {
		if err := h.src.Handle(ctx, u); err != nil {
			t.Fatal(err)
		}
		if got := h.recv(t); got.Op != u.Op {
			t.Fatalf("forwarded op %v, want %v", got.Op, u.Op)
		}
	}
	h2 := newHarness(t, dir, -1, nil)
	if _, err := h2.src.Replay(ctx); err != nil {
		t.Fatal(err)
	}
	u := h2.recv(t)
	if names(u.Pods) != "b/uid-b,c/uid-c" || u.Pods[0].Spec.Containers[0].Image != "img:2" {
		t.Fatalf("persisted set = %s", names(u.Pods))
	}
}

// TestStopWhileOutBlocked: Out never read; Run still stops.
func TestStopWhileOutBlocked(t *testing.T) {
	dir := t.TempDir()
	if err := ckptWrite(dir, pod("a")); err != nil {
		t.Fatal(err)
	}
	out := make(chan kubetypes.PodUpdate)
	s, err := New(Config{Dir: dir, Source: "file", Out: out, ReplayAfter: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNewConfigErrors(t *testing.T) {
	out := make(chan kubetypes.PodUpdate)
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{Source: "http", Out: out}, "Dir"},
		{Config{Dir: "d", Out: out}, "Source"},
		{Config{Dir: "d", Source: "a/b", Out: out}, "Source"},
		{Config{Dir: "d", Source: "x\x00", Out: out}, "Source"},
		{Config{Dir: "d", Source: "http"}, "Out"},
	} {
		if _, err := New(c.cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig naming %s", c.cfg, err, c.field)
		}
	}
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{Source: "file"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Dir", "Out"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}
