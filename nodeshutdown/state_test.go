package nodeshutdown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

const (
	startGauge = "kubelet_graceful_shutdown_start_time_seconds"
	endGauge   = "kubelet_graceful_shutdown_end_time_seconds"
)

// stateTest is a Manager with a state directory, a registry, a fake clock,
// a log observer and one pod whose kill takes killTook on the clock.
type stateTest struct {
	m    *Manager
	dir  string
	reg  *prometheus.Registry
	clk  *testingclock.FakeClock
	logs *observer.ObservedLogs
	// onKill runs inside the pod's kill, before the clock moves.
	onKill func()
	// blockKill: after moving the clock, the kill waits for its ctx to end.
	blockKill bool
	kills     int
}

const killTook = 7 * time.Second

// t0 is the clock's time, not in UTC: the file holds UTC times.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 500_000_000, time.FixedZone("CEST", 2*3600))

func newStateTest(t *testing.T, stateDir string) *stateTest {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	st := &stateTest{dir: stateDir, reg: prometheus.NewRegistry(), clk: testingclock.NewFakeClock(t0), logs: logs}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	m, err := New(Config{
		GracePeriod: 30 * time.Second,
		ActivePods:  func() []*v1.Pod { return []*v1.Pod{pod} },
		KillPod: func(ctx context.Context, _ *v1.Pod, _ int64, _ func(*v1.PodStatus)) error {
			st.kills++
			if st.onKill != nil {
				st.onKill()
			}
			st.clk.Step(killTook)
			if st.blockKill {
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
		StateDir:   stateDir,
		Registerer: st.reg,
		Clock:      st.clk,
		Logger:     zap.New(core),
	})
	if err != nil {
		t.Fatal(err)
	}
	st.m = m
	return st
}

func (st *stateTest) path() string { return filepath.Join(st.dir, StateFileName) }

// gauge reads a gauge back from the registry.
func (st *stateTest) gauge(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := st.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("gauge %s not registered", name)
	return 0
}

func (st *stateTest) checkGauges(t *testing.T, start, end float64) {
	t.Helper()
	if got := st.gauge(t, startGauge); got != start {
		t.Errorf("%s = %v, want %v", startGauge, got, start)
	}
	if got := st.gauge(t, endGauge); got != end {
		t.Errorf("%s = %v, want %v", endGauge, got, end)
	}
}

// errorLogs returns the error entries that name the state file.
func (st *stateTest) errorLogs() []observer.LoggedEntry {
	var out []observer.LoggedEntry
	for _, e := range st.logs.All() {
		if e.Level == zapcore.ErrorLevel && e.ContextMap()["file"] == st.path() {
			out = append(out, e)
		}
	}
	return out
}

// readStateFile reads the file as the kubelet does (plain JSON).
func readStateFile(t *testing.T, path string) (State, string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("state file %q: %v", b, err)
	}
	return s, string(b)
}

func writeStateFile(t *testing.T, dir, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, StateFileName), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The file holds the start time (end zero) while the pods are killed, both
// times once the shutdown is done, in the kubelet's JSON, with the
// kubelet's mode 0644 each time; the directory holds nothing else.
func TestStateFileWrittenAtStartAndEnd(t *testing.T) {
	st := newStateTest(t, t.TempDir())
	// The kill runs on its own goroutine: no t.Fatal there.
	var duringRaw []byte
	var readErr error
	var duringMode os.FileMode
	st.onKill = func() {
		duringRaw, readErr = os.ReadFile(st.path())
		if fi, err := os.Lstat(st.path()); err == nil {
			duringMode = fi.Mode()
		}
	}
	if err := st.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.kills != 1 {
		t.Fatalf("%d kills, want 1", st.kills)
	}
	if readErr != nil {
		t.Fatalf("state file during the shutdown: %v", readErr)
	}
	var during State
	if err := json.Unmarshal(duringRaw, &during); err != nil {
		t.Fatalf("state file during the shutdown %q: %v", duringRaw, err)
	}
	if !during.StartTime.Equal(t0) || !during.EndTime.IsZero() {
		t.Errorf("file during the shutdown = %+v, want start %v and no end", during, t0)
	}
	if raw := string(duringRaw); !strings.Contains(raw, `"startTime":"2026-03-01T10:00:00.5Z"`) || !strings.Contains(raw, `"endTime":"0001-01-01T00:00:00Z"`) {
		t.Errorf("file during the shutdown = %s, want the kubelet's JSON with RFC 3339 times", duringRaw)
	}
	after, _ := readStateFile(t, st.path())
	if !after.StartTime.Equal(t0) || !after.EndTime.Equal(t0.Add(killTook)) {
		t.Errorf("file after the shutdown = %+v, want start %v, end %v", after, t0, t0.Add(killTook))
	}
	st.checkGauges(t, float64(t0.Unix()), float64(t0.Add(killTook).Unix()))
	fi, err := os.Lstat(st.path())
	if err != nil {
		t.Fatal(err)
	}
	for when, mode := range map[string]os.FileMode{"during": duringMode, "after": fi.Mode()} {
		if mode != 0o644 {
			t.Errorf("file mode %s the shutdown = %v, want -rw-r--r-- (the kubelet's 0644)", when, mode)
		}
	}
	ents, err := os.ReadDir(st.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != StateFileName {
		t.Errorf("state directory holds %v, want only %s", ents, StateFileName)
	}
	if logs := st.errorLogs(); len(logs) != 0 {
		t.Errorf("errors logged: %v", logs)
	}
}

// Run sets the gauges from the file a previous run left (the kubelet's,
// with its time zone), before any shutdown.
func TestRunLoadsState(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		start, end    time.Time
	}{
		{"finished", `{"startTime":"2026-02-03T04:05:06.789+01:00","endTime":"2026-02-03T04:05:36.1+01:00"}`,
			time.Date(2026, 2, 3, 3, 5, 6, 0, time.UTC), time.Date(2026, 2, 3, 3, 5, 36, 0, time.UTC)},
		{"not finished", `{"startTime":"2026-02-03T03:05:06Z","endTime":"0001-01-01T00:00:00Z"}`,
			time.Date(2026, 2, 3, 3, 5, 6, 0, time.UTC), time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStateTest(t, t.TempDir())
				writeStateFile(t, st.dir, tc.content)
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- st.m.Run(ctx) }()
				synctest.Wait()
				var end float64
				if !tc.end.IsZero() {
					end = float64(tc.end.Unix())
				}
				st.checkGauges(t, float64(tc.start.Unix()), end)
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if st.kills != 0 {
					t.Errorf("%d kills, want none", st.kills)
				}
				if logs := st.errorLogs(); len(logs) != 0 {
					t.Errorf("errors logged: %v", logs)
				}
			})
		})
	}
}

// No file (a node's first boot) and no StateDir: gauges 0, no error.
func TestLoadStateMissing(t *testing.T) {
	for _, dir := range []string{"dir", ""} {
		st := newStateTest(t, map[string]string{"dir": t.TempDir()}[dir])
		s, err := st.m.LoadState()
		if err != nil {
			t.Errorf("StateDir %q: LoadState: %v", st.dir, err)
		}
		if s != (State{}) {
			t.Errorf("StateDir %q: LoadState = %+v, want zero", st.dir, s)
		}
		st.checkGauges(t, 0, 0)
		if dir == "" {
			// No StateDir: the shutdown keeps no file anywhere.
			if err := st.m.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			st.checkGauges(t, float64(t0.Unix()), float64(t0.Add(killTook).Unix()))
		}
	}
}

// A bad file is an error naming the file and the fault; the gauges stay 0,
// and the file, or whatever is in its place, is set aside as .corrupt so
// that the next write succeeds.
func TestLoadStateBadFile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		make    func(t *testing.T, dir string)
		wantErr string
	}{
		{"truncated", func(t *testing.T, dir string) { writeStateFile(t, dir, `{"startTime":"2026-02-03T03:0`) }, "not the state's JSON"},
		{"empty", func(t *testing.T, dir string) { writeStateFile(t, dir, "") }, "empty file"},
		{"zeros", func(t *testing.T, dir string) { writeStateFile(t, dir, "\x00\x00\x00\x00") }, "not a JSON object"},
		{"null", func(t *testing.T, dir string) { writeStateFile(t, dir, "null") }, "not a JSON object"},
		{"wrong types", func(t *testing.T, dir string) { writeStateFile(t, dir, `{"startTime":12,"endTime":true}`) }, "not the state's JSON"},
		{"not RFC 3339", func(t *testing.T, dir string) { writeStateFile(t, dir, `{"startTime":"yesterday"}`) }, "not the state's JSON"},
		{"too large", func(t *testing.T, dir string) {
			writeStateFile(t, dir, `{"startTime":"2026-02-03T03:05:06Z","x":"`+strings.Repeat("a", maxStateSize)+`"}`)
		}, "has 4139 bytes, limit 4096"},
		{"end before start", func(t *testing.T, dir string) {
			writeStateFile(t, dir, `{"startTime":"2026-02-03T03:05:06Z","endTime":"2026-02-03T03:05:05Z"}`)
		}, "endTime 2026-02-03T03:05:05Z is before startTime 2026-02-03T03:05:06Z"},
		{"end without start", func(t *testing.T, dir string) {
			writeStateFile(t, dir, `{"startTime":"0001-01-01T00:00:00Z","endTime":"2026-02-03T03:05:05Z"}`)
		}, "endTime 2026-02-03T03:05:05Z without a startTime"},
		{"before 1970", func(t *testing.T, dir string) {
			writeStateFile(t, dir, `{"startTime":"1969-12-31T23:59:59Z","endTime":"2026-02-03T03:05:05Z"}`)
		}, "startTime 1969-12-31T23:59:59Z is before 1970"},
		{"end before 1970", func(t *testing.T, dir string) {
			writeStateFile(t, dir, `{"startTime":"2026-02-03T03:05:06Z","endTime":"1960-01-01T00:00:00Z"}`)
		}, "endTime 1960-01-01T00:00:00Z is before 1970"},
		{"directory", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, StateFileName), 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"fifo", func(t *testing.T, dir string) { // must not block the read
			if err := syscall.Mkfifo(filepath.Join(dir, StateFileName), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file"},
		{"symlink", func(t *testing.T, dir string) {
			target := filepath.Join(dir, "elsewhere")
			writeStateFileAt(t, target, `{"startTime":"2026-02-03T03:05:06Z"}`)
			if err := os.Symlink(target, filepath.Join(dir, StateFileName)); err != nil {
				t.Fatal(err)
			}
		}, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStateTest(t, t.TempDir())
			tc.make(t, st.dir)
			s, err := st.m.LoadState()
			if !errors.Is(err, ErrStateCorrupt) {
				t.Fatalf("LoadState: %v, want ErrStateCorrupt", err)
			}
			if !strings.Contains(err.Error(), st.path()) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("LoadState: %q, want the file %s and %q", err, st.path(), tc.wantErr)
			}
			if s != (State{}) {
				t.Errorf("LoadState = %+v, want zero", s)
			}
			st.checkGauges(t, 0, 0)
			// Set aside, whatever it is, so that the next write succeeds.
			aside := st.path() + ".corrupt"
			if !strings.Contains(err.Error(), "set aside as "+aside) {
				t.Errorf("LoadState: %q, want it to say the file went to %s", err, aside)
			}
			if _, err := os.Lstat(aside); err != nil {
				t.Errorf("set-aside copy: %v", err)
			}
			st.m.storeState(State{StartTime: t0})
			if got, _ := readStateFile(t, st.path()); !got.StartTime.Equal(t0) {
				t.Errorf("state file after the next write = %+v, want start %v", got, t0)
			}
		})
	}
}

// A hostile state file far larger than maxStateSize, though within the
// checkpoint reader's own limit, is refused from its size without being
// read: an error naming the file, its size and the limit, the file set
// aside, and far less allocated than the file holds.
func TestLoadStateHugeFileNotRead(t *testing.T) {
	st := newStateTest(t, t.TempDir())
	writeStateFile(t, st.dir, `{"startTime":"2026-02-03T03:05:06Z","x":"`)
	const size = checkpoint.MaxSize // 10 MiB: what checkpoint.OS.ReadFile would read
	if err := os.Truncate(st.path(), size); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := st.m.LoadState()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrStateCorrupt) {
		t.Fatalf("LoadState: %v, want ErrStateCorrupt", err)
	}
	want := fmt.Sprintf("%s has %d bytes, limit %d", StateFileName, size, maxStateSize)
	if !strings.Contains(err.Error(), st.path()) || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadState: %q, want the file %s and %q", err, st.path(), want)
	}
	if !strings.Contains(err.Error(), "set aside as "+st.path()+".corrupt") {
		t.Errorf("LoadState: %q, want the file set aside", err)
	}
	// Reading the file whole would allocate at least its 10 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("LoadState allocated %d bytes for a %d-byte file, want it not read (< 1 MiB)", got, size)
	}
	st.checkGauges(t, 0, 0)
}

func writeStateFileAt(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A corrupt file is logged by Run (naming the file), the gauges stay 0, the
// manager still shuts the node down, and that shutdown rewrites the file.
func TestRunCorruptStateThenShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStateTest(t, t.TempDir())
		writeStateFile(t, st.dir, `{"startTime":"2026-02-03T03:05:06Z","endTi`)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- st.m.Run(ctx) }()
		synctest.Wait()
		logs := st.errorLogs()
		if len(logs) != 1 || !strings.Contains(logs[0].ContextMap()["error"].(string), "corrupt state file") {
			t.Fatalf("error logs %v, want one naming the file and its fault", logs)
		}
		st.checkGauges(t, 0, 0)
		st.m.Request()
		<-st.m.Finished()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if st.kills != 1 {
			t.Errorf("%d kills, want 1", st.kills)
		}
		s, _ := readStateFile(t, st.path())
		if !s.StartTime.Equal(t0) || !s.EndTime.Equal(t0.Add(killTook)) {
			t.Errorf("file after the shutdown = %+v, want start %v, end %v", s, t0, t0.Add(killTook))
		}
		st.checkGauges(t, float64(t0.Unix()), float64(t0.Add(killTook).Unix()))
	})
}

// A shutdown cut short by the agent's stop (Run's ctx ends during the
// grace period) records no end time: the file keeps the start and a zero
// end, the end gauge stays 0, the cut is logged, and after a restart the
// gauges say the last shutdown started and did not complete.
func TestRunCutShortRecordsNoEnd(t *testing.T) {
	st := newStateTest(t, t.TempDir())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st.blockKill = true
	st.onKill = cancel // the agent stops while the pod is being killed
	done := make(chan error, 1)
	go func() { done <- st.m.Run(ctx) }()
	st.m.Request()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if st.kills != 1 {
		t.Fatalf("%d kills, want 1", st.kills)
	}
	select {
	case <-st.m.Finished():
		t.Error("finished, want a shutdown cut short")
	default:
	}
	s, _ := readStateFile(t, st.path())
	if !s.StartTime.Equal(t0) || !s.EndTime.IsZero() {
		t.Errorf("file after the cut = %+v, want start %v and no end", s, t0)
	}
	st.checkGauges(t, float64(t0.Unix()), 0)
	cuts := st.logs.FilterMessageSnippet("cut short").All()
	if len(cuts) != 1 || cuts[0].ContextMap()["after"] != killTook || cuts[0].ContextMap()["error"] != context.Canceled.Error() {
		t.Errorf("logs %v, want one saying the shutdown was cut short after %v", st.logs.All(), killTook)
	}
	if logs := st.errorLogs(); len(logs) != 0 {
		t.Errorf("errors logged: %v", logs)
	}

	restarted := newStateTest(t, st.dir)
	loaded, err := restarted.m.LoadState()
	if err != nil || !loaded.StartTime.Equal(t0) || !loaded.EndTime.IsZero() {
		t.Errorf("LoadState after a restart = %+v, %v; want start %v and no end", loaded, err, t0)
	}
	restarted.checkGauges(t, float64(t0.Unix()), 0)
}

// A state file that cannot be written (its directory is a file: root
// ignores a read-only mode) is logged at start and end; the shutdown goes
// on and finishes, and the gauges are set.
func TestStateWriteFailure(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	writeStateFileAt(t, notDir, "")
	st := newStateTest(t, notDir)
	if err := st.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.kills != 1 {
		t.Errorf("%d kills, want 1", st.kills)
	}
	select {
	case <-st.m.Finished():
	default:
		t.Error("not finished")
	}
	if logs := st.errorLogs(); len(logs) != 2 || !strings.Contains(logs[0].Message, "not stored") {
		t.Errorf("error logs %v, want two (start, end) naming the file", logs)
	}
	st.checkGauges(t, float64(t0.Unix()), float64(t0.Add(killTook).Unix()))
}

// Once a shutdown has set the gauges, a late LoadState leaves them.
func TestLoadStateAfterShutdownStarted(t *testing.T) {
	st := newStateTest(t, t.TempDir())
	var loaded State
	var err error
	st.onKill = func() { // on the kill's goroutine: no t.Fatal here
		err = os.WriteFile(st.path(), []byte(`{"startTime":"2026-02-03T03:05:06Z","endTime":"2026-02-03T03:05:36Z"}`), 0o644)
		if err == nil {
			loaded, err = st.m.LoadState()
		}
	}
	if err := st.m.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err != nil || loaded.StartTime.IsZero() {
		t.Fatalf("LoadState during the shutdown = %+v, %v, want the file's state", loaded, err)
	}
	st.checkGauges(t, float64(t0.Unix()), float64(t0.Add(killTook).Unix()))
}

func TestStateDirMustBeAbsolute(t *testing.T) {
	for _, dir := range []string{"var/lib/kubelet", "/var/lib\x00/kubelet"} {
		_, err := New(Config{GracePeriod: time.Second, ActivePods: func() []*v1.Pod { return nil },
			KillPod: func(context.Context, *v1.Pod, int64, func(*v1.PodStatus)) error { return nil }, StateDir: dir})
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "StateDir") {
			t.Errorf("StateDir %q: %v, want ErrInvalidConfig naming StateDir", dir, err)
		}
	}
}
