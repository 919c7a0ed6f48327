package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// testPod is a pod of the fake kill: it stops stopAfter after its kill
// (a process handling SIGTERM), or at its grace period when stopAfter is
// negative (one ignoring SIGTERM).
type testPod struct {
	name      string
	priority  *int32
	tgps      *int64
	stopAfter time.Duration
	static    bool
	mirror    bool
}

func i32(v int32) *int32 { return &v }
func i64(v int64) *int64 { return &v }

func (p testPod) pod() *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: "default", UID: types.UID(p.name + "-uid"), Generation: 3,
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceAPI}}}
	pod.Spec.Priority = p.priority
	pod.Spec.TerminationGracePeriodSeconds = p.tgps
	if p.static {
		pod.Annotations[kubetypes.ConfigSourceAnnotation] = kubetypes.SourceFile
	}
	if p.mirror {
		pod.Annotations[kubetypes.ConfigMirrorAnnotation] = "hash"
	}
	return pod
}

// kill is one call of the fake KillPod.
type kill struct {
	pod         string
	at, stopped time.Duration
	grace       int64
	status      v1.PodStatus
}

// fakeNode records the kills of a Manager on the bubble's clock.
type fakeNode struct {
	start time.Time
	pods  map[string]testPod

	mu    sync.Mutex
	kills []kill
}

func newFakeNode(pods ...testPod) *fakeNode {
	n := &fakeNode{start: time.Now(), pods: map[string]testPod{}} //nodekit:allow clock virtual time of the synctest bubble
	for _, p := range pods {
		n.pods[p.name] = p
	}
	return n
}

func (n *fakeNode) now() time.Duration { return time.Since(n.start) } //nodekit:allow clock virtual time of the synctest bubble

func (n *fakeNode) active() []*v1.Pod {
	var out []*v1.Pod
	for _, name := range slices.Sorted(mapsKeys(n.pods)) {
		out = append(out, n.pods[name].pod())
	}
	return out
}

func mapsKeys(m map[string]testPod) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (n *fakeNode) killPod(ctx context.Context, pod *v1.Pod, grace int64, statusFn func(*v1.PodStatus)) error {
	tp := n.pods[pod.Name]
	k := kill{pod: pod.Name, at: n.now(), grace: grace}
	stop := time.Duration(grace) * time.Second
	if tp.stopAfter >= 0 && tp.stopAfter < stop {
		stop = tp.stopAfter
	}
	select {
	case <-time.After(stop):
	case <-ctx.Done():
		return ctx.Err()
	}
	k.stopped = n.now()
	k.status = v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	statusFn(&k.status)
	n.mu.Lock()
	n.kills = append(n.kills, k)
	n.mu.Unlock()
	return nil
}

func (n *fakeNode) killed() map[string]kill {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]kill{}
	for _, k := range n.kills {
		out[k.pod] = k
	}
	return out
}

func newManager(t *testing.T, cfg Config, n *fakeNode) *Manager {
	t.Helper()
	cfg.ActivePods, cfg.KillPod = n.active, n.killPod
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestGroupsFromGracePeriod(t *testing.T) {
	m, err := New(Config{GracePeriod: 30*time.Second + 700*time.Millisecond, GracePeriodCriticalPods: 10 * time.Second,
		ActivePods: func() []*v1.Pod { return nil }, KillPod: func(context.Context, *v1.Pod, int64, func(*v1.PodStatus)) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	want := []PriorityGracePeriod{{Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: kubetypes.SystemCriticalPriority, ShutdownGracePeriodSeconds: 10}}
	if got := m.Groups(); !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
	if got := m.PeriodRequested(); got != 30*time.Second {
		t.Errorf("period requested %v, want 30s", got)
	}
	m, err = New(Config{GracePeriodByPodPriority: []PriorityGracePeriod{{Priority: 100000, ShutdownGracePeriodSeconds: 5}, {Priority: 0, ShutdownGracePeriodSeconds: 7}},
		ActivePods: func() []*v1.Pod { return nil }, KillPod: func(context.Context, *v1.Pod, int64, func(*v1.PodStatus)) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Groups(); got[0].Priority != 0 || got[1].Priority != 100000 {
		t.Errorf("groups %v, want sorted by priority", got)
	}
	if got := m.PeriodRequested(); got != 12*time.Second {
		t.Errorf("period requested %v, want 12s", got)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"nothing", Config{}, []string{"no grace period", "ActivePods is required", "KillPod is required"}},
		{"critical above the whole", Config{GracePeriod: 10 * time.Second, GracePeriodCriticalPods: 20 * time.Second},
			[]string{"GracePeriodCriticalPods 20s must be <= GracePeriod 10s"}},
		{"negative", Config{GracePeriod: -time.Second}, []string{"GracePeriod -1s must be either zero or otherwise >= 1 sec"}},
		{"sub-second", Config{GracePeriod: 10 * time.Second, GracePeriodCriticalPods: 500 * time.Millisecond},
			[]string{"GracePeriodCriticalPods 500ms must be either zero or otherwise >= 1 sec"}},
		{"both", Config{GracePeriod: 10 * time.Second, GracePeriodByPodPriority: []PriorityGracePeriod{{Priority: 1, ShutdownGracePeriodSeconds: 1}}},
			[]string{"cannot specify both GracePeriodByPodPriority and GracePeriod at the same time"}},
		{"bad groups", Config{GracePeriodByPodPriority: []PriorityGracePeriod{{Priority: 1, ShutdownGracePeriodSeconds: -1}, {Priority: 1, ShutdownGracePeriodSeconds: 1}}},
			[]string{"priority 1 has a negative grace period (-1s)", "priority 1 given twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestGroupPods(t *testing.T) {
	groups := []PriorityGracePeriod{{Priority: 1, ShutdownGracePeriodSeconds: 1}, {Priority: 10, ShutdownGracePeriodSeconds: 2}, {Priority: 100, ShutdownGracePeriodSeconds: 3}}
	for _, tc := range []struct {
		prio *int32
		want int32
	}{
		{nil, 1},        // no priority is 0: below every group, the lowest
		{i32(-5), 1},    // below every group
		{i32(1), 1},     // a boundary belongs to its group
		{i32(9), 1},     // between: the lower group
		{i32(10), 10},   // boundary
		{i32(99), 10},   // between
		{i32(100), 100}, // the highest
		{i32(1e9), 100}, // above every group: the highest
	} {
		pod := testPod{name: "p", priority: tc.prio}.pod()
		var got int32 = -1
		for _, g := range groupPods(groups, []*v1.Pod{pod}) {
			if len(g.pods) == 1 {
				got = g.Priority
			}
		}
		if got != tc.want {
			p := "nil"
			if tc.prio != nil {
				p = fmt.Sprint(*tc.prio)
			}
			t.Errorf("priority %s: group %d, want %d", p, got, tc.want)
		}
	}
}

// The kubelet's two groups: non-critical pods first with 30s-10s, each
// with its own grace when smaller; the critical pods once the first group's
// budget passed (a pod ignoring SIGTERM holds it to its end).
func TestShutdownOrderAndBudgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(
			testPod{name: "quick", tgps: i64(5), stopAfter: time.Second}, // handles SIGTERM
			testPod{name: "stubborn", stopAfter: -1},                     // ignores it: killed at its grace, the budget
			testPod{name: "long", tgps: i64(60), stopAfter: -1},          // its 60s capped to the group's 20s
			testPod{name: "short", tgps: i64(3), stopAfter: -1},          // its own 3s
			testPod{name: "critical", priority: i32(kubetypes.SystemCriticalPriority), stopAfter: -1},
			testPod{name: "critical-quick", priority: i32(kubetypes.SystemCriticalPriority + 5), tgps: i64(30), stopAfter: 2 * time.Second},
		)
		m := newManager(t, Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second}, n)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := n.now(); got != 30*time.Second {
			t.Errorf("Shutdown returned at %v, want 30s (20s + 10s)", got)
		}
		want := map[string]kill{
			"quick":          {at: 0, grace: 5, stopped: time.Second},
			"stubborn":       {at: 0, grace: 20, stopped: 20 * time.Second},
			"long":           {at: 0, grace: 20, stopped: 20 * time.Second},
			"short":          {at: 0, grace: 3, stopped: 3 * time.Second},
			"critical":       {at: 20 * time.Second, grace: 10, stopped: 30 * time.Second},
			"critical-quick": {at: 20 * time.Second, grace: 10, stopped: 22 * time.Second},
		}
		checkKills(t, n, want)
	})
}

func checkKills(t *testing.T, n *fakeNode, want map[string]kill) {
	t.Helper()
	got := n.killed()
	if len(got) != len(want) {
		t.Errorf("%d pods killed, want %d: %v", len(got), len(want), got)
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s not killed", name)
			continue
		}
		if g.at != w.at || g.grace != w.grace || g.stopped != w.stopped {
			t.Errorf("%s: killed at %v with grace %ds, stopped at %v; want at %v, grace %ds, stopped %v", name, g.at, g.grace, g.stopped, w.at, w.grace, w.stopped)
		}
	}
}

// A group whose pods all stop early hands over at once.
func TestNextGroupStartsWhenGroupStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(
			testPod{name: "a", stopAfter: time.Second},
			testPod{name: "b", stopAfter: 3 * time.Second},
			testPod{name: "critical", priority: i32(kubetypes.SystemCriticalPriority), stopAfter: 4 * time.Second},
		)
		m := newManager(t, Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second}, n)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := n.now(); got != 7*time.Second {
			t.Errorf("Shutdown returned at %v, want 7s (3s + 4s)", got)
		}
		checkKills(t, n, map[string]kill{
			"a":        {at: 0, grace: 20, stopped: time.Second},
			"b":        {at: 0, grace: 20, stopped: 3 * time.Second},
			"critical": {at: 3 * time.Second, grace: 10, stopped: 7 * time.Second},
		})
	})
}

// shutdownGracePeriodByPodPriority: three groups, lowest first, pods
// placed by priority; an empty group costs nothing.
func TestPriorityGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(
			testPod{name: "none", stopAfter: -1},                         // no priority: lowest group (1000)
			testPod{name: "low", priority: i32(1500), stopAfter: -1},     // group 1000
			testPod{name: "mid", priority: i32(100000), stopAfter: -1},   // group 100000
			testPod{name: "high", priority: i32(2e9 + 1), stopAfter: -1}, // above all: group 1e9
		)
		m := newManager(t, Config{GracePeriodByPodPriority: []PriorityGracePeriod{
			{Priority: 1e9, ShutdownGracePeriodSeconds: 4},
			{Priority: 1000, ShutdownGracePeriodSeconds: 10},
			{Priority: 50000, ShutdownGracePeriodSeconds: 30}, // empty: skipped
			{Priority: 100000, ShutdownGracePeriodSeconds: 6},
		}}, n)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := n.now(); got != 20*time.Second {
			t.Errorf("Shutdown returned at %v, want 20s (10 + 6 + 4, the empty group skipped)", got)
		}
		checkKills(t, n, map[string]kill{
			"none": {at: 0, grace: 10, stopped: 10 * time.Second},
			"low":  {at: 0, grace: 10, stopped: 10 * time.Second},
			"mid":  {at: 10 * time.Second, grace: 6, stopped: 16 * time.Second},
			"high": {at: 16 * time.Second, grace: 4, stopped: 20 * time.Second},
		})
	})
}

// A kill that takes longer than its group's budget does not hold up the
// next group; it is no longer waited for after the last group.
func TestSlowKillDoesNotHoldNextGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		started := map[string]time.Duration{}
		n := newFakeNode()
		n.pods["stuck"] = testPod{name: "stuck"}
		n.pods["critical"] = testPod{name: "critical", priority: i32(kubetypes.SystemCriticalPriority)}
		var stuckEnded time.Duration
		m, err := New(Config{GracePeriod: 8 * time.Second, GracePeriodCriticalPods: 3 * time.Second, ActivePods: n.active,
			KillPod: func(ctx context.Context, pod *v1.Pod, _ int64, _ func(*v1.PodStatus)) error {
				mu.Lock()
				started[pod.Name] = n.now()
				mu.Unlock()
				if pod.Name == "stuck" {
					<-ctx.Done() // the runtime never answers
					mu.Lock()
					stuckEnded = n.now()
					mu.Unlock()
					return ctx.Err()
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if started["critical"] != 5*time.Second {
			t.Errorf("critical group started at %v, want 5s (the first group's budget)", started["critical"])
		}
		if got := n.now(); got != 5*time.Second {
			t.Errorf("Shutdown returned at %v, want 5s (the critical pod stopped at once)", got)
		}
		if stuckEnded != 5*time.Second {
			t.Errorf("the stuck kill was waited for until %v, want 5s (the end of the shutdown)", stuckEnded)
		}
	})
}

func TestKilledStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 27, 1, 0, 0, 0, time.UTC))
	pod := testPod{name: "p"}.pod()
	s := v1.PodStatus{Phase: v1.PodRunning, Reason: "", Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}}
	killedStatus(pod, now)(&s)
	if s.Phase != v1.PodFailed || s.Reason != "Terminated" || s.Message != "Pod was terminated in response to imminent node shutdown." {
		t.Errorf("status %s/%s/%q, want Failed/Terminated/the kubelet's message", s.Phase, s.Reason, s.Message)
	}
	want := v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet",
		Message: "Pod was terminated in response to imminent node shutdown.", ObservedGeneration: 3, LastTransitionTime: now}
	if len(s.Conditions) != 2 || s.Conditions[0].Type != v1.PodReady || s.Conditions[1] != want {
		t.Errorf("conditions %+v, want Ready kept and %+v", s.Conditions, want)
	}
	// Applied again later (a retried sync): the transition time is kept.
	killedStatus(pod, metav1.NewTime(now.Add(time.Minute)))(&s)
	if len(s.Conditions) != 2 || s.Conditions[1] != want {
		t.Errorf("conditions after a second application %+v, want %+v", s.Conditions, want)
	}
	done := v1.PodStatus{Phase: v1.PodSucceeded}
	killedStatus(pod, now)(&done)
	if done.Phase != v1.PodSucceeded || done.Reason != Reason {
		t.Errorf("a succeeded pod became %s/%s, want Succeeded/Terminated", done.Phase, done.Reason)
	}
}

type recorded struct{ object, reason, message string }

type fakeRecorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *fakeRecorder) Event(o runtime.Object, _, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := o.(*v1.ObjectReference)
	r.events = append(r.events, recorded{ref.Kind + "/" + ref.Name, reason, message})
}

func (r *fakeRecorder) Eventf(o runtime.Object, t, reason, f string, args ...any) {
	r.Event(o, t, reason, fmt.Sprintf(f, args...))
}

// During the shutdown: refused pods, the not-ready error, the events and
// the node status nudges; cancelled, the node is back.
func TestAdmitReadyAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(testPod{name: "a", stopAfter: -1})
		rec := &fakeRecorder{}
		var changes int
		reg := prometheus.NewRegistry()
		m := newManager(t, Config{GracePeriod: 10 * time.Second, NodeName: "node1", Recorder: rec, Registerer: reg,
			OnChange: func() { changes++ }}, n)
		newPod := testPod{name: "new"}.pod()
		if ok, _, _ := m.Admit(newPod, nil); !ok || m.ShutdownStatus() != nil || m.ShuttingDown() {
			t.Fatal("not admitting or not ready before the shutdown")
		}
		done := make(chan error, 1)
		go func() { done <- m.Shutdown(t.Context()) }()
		synctest.Wait()
		ok, reason, msg := m.Admit(newPod, nil)
		if ok || reason != "NodeShutdown" || msg != "Pod was rejected as the node is shutting down." {
			t.Errorf("admission during the shutdown: %v %q %q", ok, reason, msg)
		}
		if err := m.ShutdownStatus(); !errors.Is(err, ErrShuttingDown) || err.Error() != "node is shutting down" {
			t.Errorf("ShutdownStatus %v, want %q", err, "node is shutting down")
		}
		if changes != 1 {
			t.Errorf("OnChange called %d times at the start, want 1", changes)
		}
		if got := testutil.ToFloat64(m.startTime); got != float64(n.start.Unix()) {
			t.Errorf("start time gauge %v, want %v", got, n.start.Unix())
		}
		select {
		case <-m.Finished():
			t.Fatal("Finished closed before the pods are done")
		default:
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		<-m.Finished()
		if got := testutil.ToFloat64(m.endTime); got != float64(n.start.Add(10*time.Second).Unix()) {
			t.Errorf("end time gauge %v, want start + 10s", got)
		}
		// Done: still shutting down; a second call does nothing.
		if err := m.Shutdown(t.Context()); err != nil || n.now() != 10*time.Second || len(n.killed()) != 1 {
			t.Errorf("second Shutdown: %v at %v, %d kills", err, n.now(), len(n.killed()))
		}
		if ok, _, _ := m.Admit(newPod, nil); ok {
			t.Error("admitting after the shutdown finished")
		}
		m.CancelShutdown()
		if ok, _, _ := m.Admit(newPod, nil); !ok || m.ShutdownStatus() != nil {
			t.Error("not admitting or not ready after the cancellation")
		}
		if changes != 2 {
			t.Errorf("OnChange called %d times, want 2 (start, cancel)", changes)
		}
		want := []recorded{{"Node/node1", "NodeShutdown", "Shutdown manager detected shutdown event"},
			{"Node/node1", "NodeShutdown", "Shutdown manager detected shutdown cancellation"}}
		if !slices.Equal(rec.events, want) {
			t.Errorf("events %v, want %v", rec.events, want)
		}
	})
}

// Mirror pods are not killed; a static pod is killed as itself, in the
// group of its spec.priority (none: the lowest), as in the kubelet.
func TestStaticAndMirrorPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(
			testPod{name: "static", static: true, stopAfter: -1},
			testPod{name: "static-critical", static: true, priority: i32(kubetypes.SystemCriticalPriority + 1000), stopAfter: -1},
			testPod{name: "mirror", mirror: true, stopAfter: -1},
		)
		m := newManager(t, Config{GracePeriod: 6 * time.Second, GracePeriodCriticalPods: 2 * time.Second}, n)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkKills(t, n, map[string]kill{
			"static":          {at: 0, grace: 4, stopped: 4 * time.Second},
			"static-critical": {at: 4 * time.Second, grace: 2, stopped: 6 * time.Second},
		})
	})
}

// A shutdown whose ctx ends stops waiting and returns ctx's error, every
// goroutine joined; the node stays shutting down and a later call kills
// what is still active.
func TestShutdownCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(testPod{name: "a", stopAfter: -1}, testPod{name: "critical", priority: i32(kubetypes.SystemCriticalPriority), stopAfter: -1})
		m := newManager(t, Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second}, n)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := m.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want the deadline", err)
		}
		if !m.ShuttingDown() {
			t.Error("not shutting down after an interrupted shutdown")
		}
		if len(n.killed()) != 0 {
			t.Errorf("kills %v, want none completed", n.killed())
		}
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(n.killed()) != 2 {
			t.Errorf("kills %v after the second call, want both pods", n.killed())
		}
	})
}

// Run starts a shutdown on Request, and runs once.
func TestRunRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(testPod{name: "a", stopAfter: time.Second})
		m := newManager(t, Config{GracePeriod: 10 * time.Second}, n)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if m.ShuttingDown() {
			t.Fatal("shutting down before a request")
		}
		m.Request()
		m.Request()
		<-m.Finished()
		if got := n.now(); got != time.Second {
			t.Errorf("finished at %v, want 1s", got)
		}
		if err := m.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v, want ErrAlreadyRan", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if len(n.killed()) != 1 {
			t.Errorf("kills %v, want one", n.killed())
		}
	})
}

// Concurrent calls: one shutdown, both return when it is done.
func TestConcurrentShutdownCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(testPod{name: "a", stopAfter: 2 * time.Second})
		m := newManager(t, Config{GracePeriod: 10 * time.Second}, n)
		var wg sync.WaitGroup
		ends := make([]time.Duration, 2)
		for i := range ends {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := m.Shutdown(t.Context()); err != nil {
					t.Error(err)
				}
				ends[i] = n.now()
			}()
		}
		wg.Wait()
		if ends[0] != 2*time.Second || ends[1] != 2*time.Second {
			t.Errorf("returned at %v, want both at 2s", ends)
		}
		if len(n.killed()) != 1 {
			t.Errorf("kills %v, want one", n.killed())
		}
	})
}

// WaitForUnmount holds the group until the volumes are gone, at most its
// budget.
func TestWaitForUnmount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newFakeNode(testPod{name: "a", stopAfter: time.Second}, testPod{name: "critical", priority: i32(kubetypes.SystemCriticalPriority), stopAfter: time.Second})
		cfg := Config{GracePeriod: 20 * time.Second, GracePeriodCriticalPods: 5 * time.Second,
			WaitForUnmount: func(ctx context.Context, pod *v1.Pod) error {
				d := 2 * time.Second
				if pod.Name == "critical" {
					d = time.Hour
				}
				select {
				case <-time.After(d):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}
		m := newManager(t, cfg, n)
		if err := m.Shutdown(t.Context()); err != nil {
			t.Fatal(err)
		}
		checkKills(t, n, map[string]kill{
			"a":        {at: 0, grace: 15, stopped: time.Second},
			"critical": {at: 3 * time.Second, grace: 5, stopped: 4 * time.Second},
		})
		if got := n.now(); got != 8*time.Second {
			t.Errorf("returned at %v, want 8s (the critical group's unmount held to its budget)", got)
		}
	})
}
