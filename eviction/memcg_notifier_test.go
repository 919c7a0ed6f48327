package eviction_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction"
)

const memcgMi = int64(1) << 20

func memcgThreshold(t testing.TB, signal, value string) eviction.Threshold {
	t.Helper()
	ts, err := eviction.ParseThresholds(map[string]string{signal: value}, nil, nil, nil)
	if err != nil || len(ts) != 1 {
		t.Fatalf("ParseThresholds(%s<%s) = %v, %v", signal, value, ts, err)
	}
	return ts[0]
}

func memcgWrite(t *testing.T, file, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// memcgV2Tree is a fake cgroup v2 mount with a kubepods cgroup.
type memcgV2Tree struct {
	t    *testing.T
	root string
}

func newMemcgV2Tree(t *testing.T) *memcgV2Tree {
	tr := &memcgV2Tree{t: t, root: t.TempDir()}
	memcgWrite(t, filepath.Join(tr.root, "cgroup.controllers"), "cpuset cpu io memory pids\n")
	tr.set(0, 0)
	tr.events(0, 0)
	return tr
}

// set writes kubepods' memory.current and inactive_file (MiB).
func (tr *memcgV2Tree) set(currentMi, inactiveMi int64) {
	tr.setBytes(currentMi*memcgMi, inactiveMi*memcgMi)
}

func (tr *memcgV2Tree) setBytes(current, inactive int64) {
	dir := filepath.Join(tr.root, "kubepods")
	memcgWrite(tr.t, filepath.Join(dir, "memory.current"), strconv.FormatInt(current, 10)+"\n")
	memcgWrite(tr.t, filepath.Join(dir, "memory.stat"),
		"anon 1\nfile 2\nactive_file 3\ninactive_file "+strconv.FormatInt(inactive, 10)+"\nslab 5\n")
}

func (tr *memcgV2Tree) events(high, oomKill int) {
	memcgWrite(tr.t, filepath.Join(tr.root, "kubepods", "memory.events"),
		"low 0\nhigh "+strconv.Itoa(high)+"\nmax 0\noom 0\noom_kill "+strconv.Itoa(oomKill)+"\noom_group_kill 0\n")
}

// allocSummary: the pods cgroup has capacity availMi+wsMi.
func allocSummary(availMi, wsMi int64) *eviction.Summary {
	return &eviction.Summary{AllocatableMemory: &eviction.MemoryStats{
		AvailableBytes: uint64(availMi * memcgMi), WorkingSetBytes: uint64(wsMi * memcgMi),
	}}
}

func newV2Notifier(t *testing.T, tr *memcgV2Tree, cfg eviction.MemcgNotifierConfig) *eviction.MemcgNotifier {
	t.Helper()
	if cfg.Threshold.Signal == "" {
		cfg.Threshold = memcgThreshold(t, "allocatableMemory.available", "500Mi")
		cfg.Cgroup = "kubepods"
	}
	cfg.CgroupRoot = tr.root
	n, err := eviction.NewMemcgNotifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustPoll(t *testing.T, n *eviction.MemcgNotifier, want bool, why string) {
	t.Helper()
	got, err := n.Poll()
	if err != nil {
		t.Fatalf("%s: Poll: %v", why, err)
	}
	if got != want {
		t.Fatalf("%s: Poll = %v, want %v", why, got, want)
	}
}

func TestNewMemcgNotifierValidates(t *testing.T) {
	mem := memcgThreshold(t, "memory.available", "100Mi")
	alloc := memcgThreshold(t, "allocatableMemory.available", "100Mi")
	disk := memcgThreshold(t, "nodefs.available", "10%")
	for _, tc := range []struct {
		name string
		cfg  eviction.MemcgNotifierConfig
		want string // "" means valid
	}{
		{"node", eviction.MemcgNotifierConfig{Threshold: mem}, ""},
		{"node slash", eviction.MemcgNotifierConfig{Threshold: mem, Cgroup: "/"}, ""},
		{"allocatable", eviction.MemcgNotifierConfig{Threshold: alloc, Cgroup: "/kubepods/"}, ""},
		{"missing root is no error: no I/O", eviction.MemcgNotifierConfig{Threshold: mem, CgroupRoot: "/does/not/exist", Version: 2}, ""},
		{"disk signal", eviction.MemcgNotifierConfig{Threshold: disk}, "Threshold: signal \"nodefs.available\""},
		{"no value", eviction.MemcgNotifierConfig{Threshold: eviction.Threshold{Signal: eviction.SignalMemoryAvailable}}, "Threshold: value"},
		{"allocatable without cgroup", eviction.MemcgNotifierConfig{Threshold: alloc}, "Cgroup is empty"},
		{"dot dot", eviction.MemcgNotifierConfig{Threshold: mem, Cgroup: "kubepods/../../etc"}, "Cgroup \"kubepods/../../etc\""},
		{"version", eviction.MemcgNotifierConfig{Threshold: mem, Version: 3}, "Version 3"},
		{"poll interval", eviction.MemcgNotifierConfig{Threshold: mem, PollInterval: -time.Second}, "PollInterval is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := eviction.NewMemcgNotifier(tc.cfg)
			if tc.want == "" {
				if err != nil || n == nil {
					t.Fatalf("NewMemcgNotifier: %v", err)
				}
				if _, armed := n.Armed(); armed {
					t.Fatal("armed before UpdateThreshold")
				}
				return
			}
			if !errors.Is(err, eviction.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
}

func TestMemcgUsageThreshold(t *testing.T) {
	const gi = 1024 * memcgMi
	for _, tc := range []struct {
		value              string
		capacity, inactive int64
		want               int64
	}{
		// One byte past available == threshold: met is strictly below.
		{"100Mi", 8 * gi, gi, 8*gi - 100*memcgMi + 1 + gi},
		{"100Mi", 8 * gi, 0, 8*gi - 100*memcgMi + 1},
		{"25%", 8 * gi, 512 * memcgMi, 6*gi + 1 + 512*memcgMi},
		{"1Gi", 512 * memcgMi, 300 * memcgMi, 300 * memcgMi}, // threshold above capacity: crossed at once
		{"100Mi", 8 * gi, -5, 8*gi - 100*memcgMi + 1},        // nonsense inactive counts as 0
	} {
		th := memcgThreshold(t, "memory.available", tc.value)
		if got := eviction.MemcgUsageThreshold(th, tc.capacity, tc.inactive); got != tc.want {
			t.Errorf("MemcgUsageThreshold(%s, %d, %d) = %d, want %d", tc.value, tc.capacity, tc.inactive, got, tc.want)
		}
	}
}

// TestMemcgV2Poll: crossing triggers once (edge), staying over or below
// does not, memory.events growth triggers, and re-arming moves the point.
func TestMemcgV2Poll(t *testing.T) {
	tr := newMemcgV2Tree(t)
	n := newV2Notifier(t, tr, eviction.MemcgNotifierConfig{})
	// Capacity 4096Mi, threshold 500Mi: met from a working set of 3596Mi+1.
	if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil {
		t.Fatal(err)
	}
	if v, armed := n.Armed(); !armed || v != 3596*memcgMi+1 {
		t.Fatalf("Armed = %d, %v; want %d", v, armed, 3596*memcgMi+1)
	}
	tr.set(3700, 200) // working set 3500Mi
	mustPoll(t, n, false, "below")
	tr.set(3796, 200) // 3596Mi: available is the threshold, not below it
	mustPoll(t, n, false, "available equal to the threshold")
	tr.setBytes(3796*memcgMi+1, 200*memcgMi)
	mustPoll(t, n, true, "one byte over")
	tr.set(3900, 200)
	mustPoll(t, n, false, "still over")
	tr.set(3900, 400) // 3500Mi: inactive file does not count
	mustPoll(t, n, false, "back below")
	tr.set(4000, 100)
	mustPoll(t, n, true, "over again")

	tr.set(3000, 0)
	mustPoll(t, n, false, "below, events unchanged")
	tr.events(1, 0)
	mustPoll(t, n, true, "memory.events high grew")
	mustPoll(t, n, false, "memory.events unchanged")
	tr.events(1, 1)
	mustPoll(t, n, true, "memory.events oom_kill grew")

	// Re-arm: capacity 3200Mi now, crossed at 2700Mi+1; 3000Mi is over.
	if err := n.UpdateThreshold(allocSummary(200, 3000)); err != nil {
		t.Fatal(err)
	}
	if v, _ := n.Armed(); v != 2700*memcgMi+1 {
		t.Fatalf("re-armed at %d, want %d", v, 2700*memcgMi+1)
	}
	mustPoll(t, n, true, "over the new crossing point")
}

// TestMemcgV2PollRoot: the v2 root has no memory.current nor memory.events;
// its usage is anon + file from memory.stat.
func TestMemcgV2PollRoot(t *testing.T) {
	root := t.TempDir()
	memcgWrite(t, filepath.Join(root, "cgroup.controllers"), "memory\n")
	stat := func(anonMi, fileMi, inactiveMi int64) {
		memcgWrite(t, filepath.Join(root, "memory.stat"), "anon "+strconv.FormatInt(anonMi*memcgMi, 10)+
			"\nfile "+strconv.FormatInt(fileMi*memcgMi, 10)+"\ninactive_file "+strconv.FormatInt(inactiveMi*memcgMi, 10)+"\n")
	}
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
		Threshold: memcgThreshold(t, "memory.available", "25%"), CgroupRoot: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Capacity 1000Mi, threshold 25%: met over 750Mi.
	if err := n.UpdateThreshold(&eviction.Summary{Memory: &eviction.MemoryStats{AvailableBytes: uint64(600 * memcgMi), WorkingSetBytes: uint64(400 * memcgMi)}}); err != nil {
		t.Fatal(err)
	}
	stat(500, 450, 200)
	mustPoll(t, n, false, "750Mi")
	stat(500, 451, 200)
	mustPoll(t, n, true, "751Mi")
	if err := os.Remove(filepath.Join(root, "memory.stat")); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Poll(); !errors.Is(err, eviction.ErrMemcgNotifier) || !strings.Contains(err.Error(), "memory.stat") {
		t.Fatalf("Poll without memory.stat: %v", err)
	}
}

func TestMemcgV2PollErrors(t *testing.T) {
	tr := newMemcgV2Tree(t)
	n := newV2Notifier(t, tr, eviction.MemcgNotifierConfig{})
	if err := n.UpdateThreshold(&eviction.Summary{Memory: &eviction.MemoryStats{}}); !errors.Is(err, eviction.ErrStats) {
		t.Fatalf("summary without allocatable memory: %v", err)
	}
	if err := n.UpdateThreshold(nil); !errors.Is(err, eviction.ErrStats) {
		t.Fatalf("nil summary: %v", err)
	}
	if err := n.UpdateThreshold(allocSummary(1000, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(tr.root, "kubepods", "memory.current")); err != nil {
		t.Fatal(err)
	}
	_, err := n.Poll()
	if !errors.Is(err, eviction.ErrMemcgNotifier) || !strings.Contains(err.Error(), filepath.Join(tr.root, "kubepods", "memory.current")) {
		t.Fatalf("Poll with memory.current missing: %v", err)
	}
	memcgWrite(t, filepath.Join(tr.root, "kubepods", "memory.current"), "max\n")
	if _, err := n.Poll(); !errors.Is(err, eviction.ErrMemcgNotifier) || !strings.Contains(err.Error(), "memory.current") {
		t.Fatalf("Poll with a garbage memory.current: %v", err)
	}
}

// TestMemcgV2Run: Run polls on the injected clock and calls trigger on a
// crossing; it refuses a second Run and returns once ctx is done.
func TestMemcgV2Run(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		tr := newMemcgV2Tree(t)
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		n := newV2Notifier(t, tr, eviction.MemcgNotifierConfig{Clock: clk, PollInterval: 50 * time.Millisecond})
		if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil { // met over 3596Mi
			t.Fatal(err)
		}
		tr.set(3000, 0)
		triggers := 0
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx, func() { triggers++ }) }()
		synctest.Wait()
		if err := n.Run(ctx, func() {}); !errors.Is(err, eviction.ErrAlreadyRan) {
			t.Fatalf("second Run: %v", err)
		}
		step := func(want int, why string) {
			t.Helper()
			clk.Step(50 * time.Millisecond)
			synctest.Wait()
			if triggers != want {
				t.Fatalf("%s: %d triggers, want %d", why, triggers, want)
			}
		}
		step(0, "below")
		tr.set(3600, 0)
		clk.Step(49 * time.Millisecond)
		synctest.Wait()
		if triggers != 0 {
			t.Fatal("polled before PollInterval")
		}
		clk.Step(time.Millisecond)
		synctest.Wait()
		if triggers != 1 {
			t.Fatalf("crossing: %d triggers, want 1", triggers)
		}
		step(1, "still over")
		tr.set(3000, 0)
		step(1, "below")
		// Re-arm lower while running: 3000Mi is over 2700Mi.
		if err := n.UpdateThreshold(allocSummary(200, 3000)); err != nil {
			t.Fatal(err)
		}
		step(2, "re-armed")
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v", err)
		}
	})
}

func TestMemcgRunNilTrigger(t *testing.T) {
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{Threshold: memcgThreshold(t, "memory.available", "1Gi"), Version: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Run(t.Context(), nil); !errors.Is(err, eviction.ErrInvalidConfig) {
		t.Fatalf("Run(nil trigger) = %v", err)
	}
}

// TestMemcgV1RegistrationErrors: each missing file is named.
func TestMemcgV1RegistrationErrors(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "memory", "kubepods")
	n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
		Threshold: memcgThreshold(t, "allocatableMemory.available", "100Mi"), Cgroup: "kubepods", CgroupRoot: root,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := allocSummary(1000, 1000)
	for _, step := range []struct{ create, missing string }{
		{"", "memory.stat"},
		{"memory.stat", "memory.usage_in_bytes"},
		{"memory.usage_in_bytes", "cgroup.event_control"},
	} {
		if step.create != "" {
			memcgWrite(t, filepath.Join(dir, step.create), "total_inactive_file 0\n")
		}
		err := n.UpdateThreshold(s)
		if !errors.Is(err, eviction.ErrMemcgNotifier) || !strings.Contains(err.Error(), filepath.Join(dir, step.missing)) {
			t.Fatalf("without %s: %v", step.missing, err)
		}
		if _, armed := n.Armed(); armed {
			t.Fatalf("armed without %s", step.missing)
		}
	}
}

// TestMemcgNotifierWithManager: the notifier as one of the manager's
// Notifiers (v2 tree, fake clock, periodic cycle an hour away): the first
// cycle arms it, and a crossing seen by the next poll evicts at once.
func TestMemcgNotifierWithManager(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		tr := newMemcgV2Tree(t)
		clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
		th := memcgThreshold(t, "allocatableMemory.available", "500Mi")
		n := newV2Notifier(t, tr, eviction.MemcgNotifierConfig{Threshold: th, Cgroup: "kubepods", Clock: clk})
		stats := eviction.NewFakeStats(allocSummary(1096, 3000)) // met over 3596Mi
		tr.set(3000, 0)
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default", UID: "hog"}}
		var killed []string
		m, err := eviction.New(eviction.Config{
			Thresholds: []eviction.Threshold{th},
			Stats:      stats,
			ActivePods: func() []*v1.Pod { return []*v1.Pod{pod} },
			KillPod: func(_ context.Context, p *v1.Pod, st v1.PodStatus, _ int64) error {
				killed = append(killed, p.Name+" "+st.Reason)
				return nil
			},
			Notifiers: []eviction.ThresholdNotifier{n},
			Interval:  time.Hour,
			Clock:     clk,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if v, armed := n.Armed(); !armed || v != 3596*memcgMi+1 {
			t.Fatalf("after the first cycle: Armed = %d, %v", v, armed)
		}
		clk.Step(100 * time.Millisecond)
		synctest.Wait()
		if len(killed) != 0 {
			t.Fatalf("killed %v below the threshold", killed)
		}
		stats.Set(allocSummary(400, 3696))
		tr.set(3696, 0)
		clk.Step(100 * time.Millisecond)
		synctest.Wait()
		if len(killed) != 1 || killed[0] != "hog Evicted" {
			t.Fatalf("killed %v, want [hog Evicted] from the crossing", killed)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("manager Run returned %v", err)
		}
	})
}

// With a Layout, the notifier asks it for its cgroups at the first
// UpdateThreshold: while it fails (a container manager not started yet)
// UpdateThreshold and Poll fail and Run waits; once it answers, the
// notifier watches what it named.
func TestMemcgLayout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := newMemcgV2Tree(t)
		layoutErr := errors.New("not started")
		notYet := layoutErr
		asked := 0
		n, err := eviction.NewMemcgNotifier(eviction.MemcgNotifierConfig{
			Threshold: memcgThreshold(t, "allocatableMemory.available", "500Mi"),
			Layout: func() (string, string, error) {
				asked++
				return tr.root, "kubepods", layoutErr
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := n.UpdateThreshold(allocSummary(1096, 3000)); !errors.Is(err, notYet) {
			t.Fatalf("UpdateThreshold before the layout: %v", err)
		}
		if _, err := n.Poll(); !errors.Is(err, notYet) {
			t.Fatalf("Poll before the layout: %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- n.Run(ctx, func() {}) }()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("Run returned %v before the layout", err)
		default:
		}
		layoutErr = nil
		if err := n.UpdateThreshold(allocSummary(1096, 3000)); err != nil {
			t.Fatal(err)
		}
		if v, armed := n.Armed(); !armed || v != 3596*memcgMi+1 {
			t.Fatalf("Armed = %d, %v", v, armed)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		tr.set(4000, 100)
		mustPoll(t, n, true, "over, in the laid-out pods cgroup")
		if asked != 4 {
			t.Fatalf("Layout asked %d times, want 4 (two failures, Run's, the answer)", asked)
		}
	})
}
