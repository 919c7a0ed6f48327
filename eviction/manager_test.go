package eviction

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

type fakeStats struct{ s *Summary }

func (f *fakeStats) Summary(context.Context) (*Summary, error) {
	if f.s == nil {
		return nil, errors.New("no stats")
	}
	c := *f.s
	return &c, nil
}

type kill struct {
	pod    *v1.Pod
	status v1.PodStatus
	grace  int64
}

type harness struct {
	m     *Manager
	clock *clocktesting.FakeClock
	stats *fakeStats
	pods  []*v1.Pod
	kills []kill
}

func newHarness(t *testing.T, ts []Threshold, pods []*v1.Pod, cfg Config) *harness {
	t.Helper()
	h := &harness{clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), stats: &fakeStats{}, pods: pods}
	cfg.Thresholds = ts
	cfg.Stats = h.stats
	cfg.Clock = h.clock
	cfg.ActivePods = func() []*v1.Pod { return h.pods }
	cfg.KillPod = func(_ context.Context, pod *v1.Pod, st v1.PodStatus, g int64) error {
		h.kills = append(h.kills, kill{pod, st, g})
		return nil
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	return h
}

func (h *harness) sync(t *testing.T) []*v1.Pod {
	t.Helper()
	got, err := h.m.SyncOnce(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func mustParse(t *testing.T, hard, soft, grace, mr map[string]string) []Threshold {
	t.Helper()
	ts, err := ParseThresholds(hard, soft, grace, mr)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func mkPod(name string, prio int32, memReq, memLim string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c"}}},
	}
	if memReq != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(memReq)}
	}
	if memLim != "" {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse(memLim)}
	}
	return p
}

func mi(n uint64) uint64 { return n << 20 }

func memSummary(availMi uint64, use map[string]uint64) *Summary {
	s := &Summary{Memory: &MemoryStats{AvailableBytes: mi(availMi), WorkingSetBytes: mi(2048 - availMi)}}
	for name, u := range use {
		s.Pods = append(s.Pods, PodStats{UID: types.UID(name), MemoryWorkingSetBytes: mi(u),
			Containers: []ContainerStats{{Name: "c", MemoryWorkingSetBytes: mi(u)}}})
	}
	return s
}

func names(pods []*v1.Pod) string {
	var n []string
	for _, p := range pods {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

// TestMemoryPressure: soft threshold gives pressure at once, evicts only
// after its grace with min(maxPodGrace, pod grace); a hard threshold evicts
// with grace 1; BestEffort pods are rejected; pressure lingers 5m.
func TestMemoryPressure(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "2Gi"},
		map[string]string{"memory.available": "1m30s"}, nil)
	be := mkPod("best-effort", 0, "", "")
	bu := mkPod("burstable", 0, "100Mi", "200Mi")
	gu := mkPod("guaranteed", 0, "1Gi", "1Gi")
	tgps := int64(10)
	bu.Spec.TerminationGracePeriodSeconds = &tgps
	h := newHarness(t, ts, []*v1.Pod{gu, be, bu}, Config{MaxPodGracePeriodSeconds: 5})
	use := map[string]uint64{"best-effort": 100, "burstable": 400, "guaranteed": 500}

	h.stats.s = memSummary(3000, use) // plenty: 3000Mi > 2Gi
	h.stats.s.Memory.WorkingSetBytes = mi(1000)
	if got := h.sync(t); got != nil || h.m.IsUnderMemoryPressure() {
		t.Fatalf("no pressure expected: %v", names(got))
	}
	if ok, _, _ := h.m.Admit(mkPod("new", 0, "", ""), nil); !ok {
		t.Fatal("BestEffort rejected without pressure")
	}

	// Soft threshold crossed: pressure now, no eviction before grace.
	h.clock.Step(time.Minute)
	h.stats.s = memSummary(1500, use)
	if got := h.sync(t); got != nil {
		t.Fatalf("evicted before grace: %v", names(got))
	}
	if !h.m.IsUnderMemoryPressure() {
		t.Fatal("soft threshold met: want memory pressure at once")
	}
	ok, reason, msg := h.m.Admit(mkPod("new", 0, "", ""), nil)
	if ok || reason != "Evicted" || msg != "The node had condition: [MemoryPressure]. " {
		t.Fatalf("BestEffort admit = %v %q %q", ok, reason, msg)
	}
	if ok, _, _ := h.m.Admit(mkPod("new", 0, "100Mi", ""), nil); !ok {
		t.Fatal("Burstable rejected under memory pressure")
	}

	// Grace elapsed: evict the pod over its request the most: burstable
	// (300Mi over) before best-effort (100Mi over); guaranteed is under.
	h.clock.Step(2 * time.Minute)
	got := h.sync(t)
	if names(got) != "burstable" || len(h.kills) != 1 {
		t.Fatalf("evicted %v", names(got))
	}
	k := h.kills[0]
	if k.grace != 5 {
		t.Fatalf("soft grace = %d, want min(max 5, pod 10) = 5", k.grace)
	}
	if k.status.Phase != v1.PodFailed || k.status.Reason != "Evicted" {
		t.Fatalf("status %+v", k.status)
	}
	wantMsg := "The node was low on resource: memory. Threshold quantity: 2Gi, available: 1500Mi. Container c was using 400Mi, request is 100Mi, has larger consumption of memory. "
	if k.status.Message != wantMsg {
		t.Fatalf("message\n%q\nwant\n%q", k.status.Message, wantMsg)
	}
	if len(k.status.Conditions) != 1 || k.status.Conditions[0].Type != v1.DisruptionTarget || k.status.Conditions[0].Reason != v1.PodReasonTerminationByKubelet {
		t.Fatalf("conditions %+v", k.status.Conditions)
	}

	// Hard threshold: grace 1, at once.
	h.pods = []*v1.Pod{gu, be}
	h.clock.Step(time.Second)
	h.stats.s = memSummary(500, use)
	got = h.sync(t)
	if names(got) != "best-effort" || h.kills[1].grace != 1 {
		t.Fatalf("hard: evicted %v grace %d", names(got), h.kills[1].grace)
	}

	// Relief: pressure lingers for the transition period, then clears.
	h.clock.Step(time.Second)
	h.stats.s = memSummary(3000, use)
	if got := h.sync(t); got != nil || !h.m.IsUnderMemoryPressure() {
		t.Fatalf("want pressure to linger, evicted %v", names(got))
	}
	h.clock.Step(4 * time.Minute)
	h.sync(t)
	if !h.m.IsUnderMemoryPressure() {
		t.Fatal("cleared before 5m")
	}
	h.clock.Step(time.Minute + time.Second)
	h.sync(t)
	if h.m.IsUnderMemoryPressure() {
		t.Fatal("still under pressure after 5m")
	}
	if ok, _, _ := h.m.Admit(mkPod("new", 0, "", ""), nil); !ok {
		t.Fatal("BestEffort rejected after pressure cleared")
	}
}

// TestMinReclaim: once met, a threshold stays met until available reaches
// threshold + minReclaim.
func TestMinReclaim(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, map[string]string{"memory.available": "500Mi"})
	h := newHarness(t, ts, []*v1.Pod{mkPod("a", 0, "", ""), mkPod("b", 0, "", "")}, Config{})
	use := map[string]uint64{"a": 100, "b": 200}
	h.stats.s = memSummary(500, use)
	if names(h.sync(t)) != "b" {
		t.Fatal("want b evicted")
	}
	// Above the threshold but under threshold+minReclaim: still evicting.
	h.clock.Step(10 * time.Second)
	h.stats.s = memSummary(1200, use)
	if got := h.sync(t); names(got) != "b" || !h.m.IsUnderMemoryPressure() {
		t.Fatalf("min reclaim not enforced: %v", names(got))
	}
	// Above threshold + minReclaim: done.
	h.clock.Step(10 * time.Second)
	h.stats.s = memSummary(2000, use)
	h.stats.s.Memory.WorkingSetBytes = 0
	if got := h.sync(t); got != nil {
		t.Fatalf("evicted %v after reclaim", names(got))
	}
}

type fakeGC struct {
	calls *[]string
	name  string
	free  func()
	err   error
}

func (g fakeGC) DeleteUnusedImages(context.Context) error {
	*g.calls = append(*g.calls, g.name)
	g.free()
	return g.err
}

func (g fakeGC) DeleteAllUnusedContainers(context.Context) error {
	*g.calls = append(*g.calls, g.name)
	g.free()
	return g.err
}

// TestNodeReclaimFuncs: disk pressure runs container GC then image GC and
// re-measures; if that suffices no pod is evicted, else one is.
func TestNodeReclaimFuncs(t *testing.T) {
	ts := mustParse(t, map[string]string{"nodefs.available": "1Gi"}, nil, nil, map[string]string{"nodefs.available": "500Mi"})
	var calls []string
	h := newHarness(t, ts, nil, Config{})
	disk := func(avail uint64) *Summary {
		return &Summary{NodeFs: &FsStats{AvailableBytes: mi(avail), CapacityBytes: mi(10240), InodesFree: 1000, Inodes: 2000},
			Pods: []PodStats{{UID: "a", RootfsBytes: mi(10)}, {UID: "b", RootfsBytes: mi(100), LogsBytes: mi(50)}}}
	}
	h.pods = []*v1.Pod{mkPod("a", 0, "", ""), mkPod("b", 0, "", "")}
	freed := uint64(0)
	h.m.cfg.ContainerGC = fakeGC{&calls, "containers", func() { freed += 300 }, nil}
	h.m.cfg.ImageGC = fakeGC{&calls, "images", func() { freed += 1000 }, nil}
	h.stats.s = disk(500)
	h.m.cfg.Stats = statsFunc(func() *Summary { return disk(500 + freed) })
	if got := h.sync(t); got != nil {
		t.Fatalf("GC freed enough, yet evicted %v", names(got))
	}
	if strings.Join(calls, ",") != "containers,images" {
		t.Fatalf("calls %v", calls)
	}
	if !h.m.IsUnderDiskPressure() {
		t.Fatal("want disk pressure")
	}
	// GC frees too little (and fails): evict the largest disk user.
	calls, freed = nil, 0
	h.m.cfg.ImageGC = fakeGC{&calls, "images", func() {}, errors.New("in use")}
	h.m.cfg.ContainerGC = fakeGC{&calls, "containers", func() {}, nil}
	h.clock.Step(10 * time.Second)
	if got := h.sync(t); names(got) != "b" {
		t.Fatalf("evicted %v, want b", names(got))
	}
	if !strings.HasPrefix(h.kills[0].status.Message, "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 500Mi. ") {
		t.Fatalf("message %q", h.kills[0].status.Message)
	}
}

type statsFunc func() *Summary

func (f statsFunc) Summary(context.Context) (*Summary, error) { return f(), nil }

// TestStaticCriticalPodsAreNotEvicted: static, mirror and system-critical
// pods are skipped; with only those, nothing is evicted.
func TestStaticCriticalPodsAreNotEvicted(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	static := mkPod("static", 0, "", "")
	static.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: "file"}
	mirror := mkPod("mirror", 0, "", "")
	mirror.Annotations = map[string]string{kubetypes.ConfigMirrorAnnotation: "x"}
	crit := mkPod("critical", kubetypes.SystemCriticalPriority, "", "")
	apiPod := mkPod("api", 0, "", "")
	apiPod.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: "api"}
	h := newHarness(t, ts, []*v1.Pod{static, mirror, crit}, Config{})
	h.stats.s = memSummary(100, map[string]uint64{"static": 900, "mirror": 800, "critical": 700, "api": 10})
	if got := h.sync(t); got != nil || len(h.kills) != 0 {
		t.Fatalf("evicted a critical pod: %v", names(got))
	}
	h.pods = append(h.pods, apiPod)
	h.clock.Step(10 * time.Second)
	if got := h.sync(t); names(got) != "api" {
		t.Fatalf("evicted %v, want api", names(got))
	}
	if ok, _, _ := h.m.Admit(static, nil); !ok {
		t.Fatal("static pod rejected")
	}
}

// TestAdmitUnderNodeConditions: memory pressure alone admits tolerating
// BestEffort pods; disk pressure rejects all but critical pods.
func TestAdmitUnderNodeConditions(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi", "nodefs.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, nil, Config{})
	h.stats.s = memSummary(100, nil)
	h.stats.s.NodeFs = &FsStats{AvailableBytes: mi(5000), CapacityBytes: mi(10000)}
	h.sync(t)
	tol := mkPod("tolerant", 0, "", "")
	tol.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	diskTol := mkPod("disk-tolerant", 0, "", "")
	diskTol.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	for _, c := range []struct {
		pod  *v1.Pod
		want bool
	}{{tol, true}, {diskTol, false}, {mkPod("be", 0, "", ""), false}, {mkPod("bu", 0, "1Mi", ""), true}} {
		if ok, _, _ := h.m.Admit(c.pod, nil); ok != c.want {
			t.Errorf("memory pressure: admit %s = %v", c.pod.Name, ok)
		}
	}
	h.clock.Step(10 * time.Second)
	h.stats.s.NodeFs.AvailableBytes = mi(100)
	h.sync(t)
	ok, reason, msg := h.m.Admit(mkPod("bu", 0, "1Mi", ""), nil)
	if ok || reason != "Evicted" || msg != "The node had condition: [MemoryPressure DiskPressure]. " {
		t.Fatalf("disk pressure: %v %q %q", ok, reason, msg)
	}
	if ok, _, _ := h.m.Admit(mkPod("crit", kubetypes.SystemCriticalPriority, "", ""), nil); !ok {
		t.Fatal("critical pod rejected")
	}
}

// TestThresholdsMetGracePeriod: a soft threshold acts only once it has been
// met continuously for its grace period; a gap resets the clock.
func TestThresholdsMetGracePeriod(t *testing.T) {
	ts := mustParse(t, nil, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "1m"}, nil)
	h := newHarness(t, ts, []*v1.Pod{mkPod("a", 0, "", "")}, Config{})
	use := map[string]uint64{"a": 10}
	h.stats.s = memSummary(500, use)
	h.sync(t)
	h.clock.Step(59 * time.Second)
	if h.sync(t) != nil {
		t.Fatal("acted before the grace period")
	}
	h.stats.s = memSummary(1500, use) // met no more: forgets when it was first met
	h.clock.Step(2 * time.Second)
	h.sync(t)
	h.stats.s = memSummary(500, use)
	h.clock.Step(2 * time.Second)
	if h.sync(t) != nil {
		t.Fatal("grace period did not restart")
	}
	h.clock.Step(time.Minute)
	if names(h.sync(t)) != "a" {
		t.Fatal("want eviction after a full grace period")
	}
}

// TestNodeConditionsObservedSince: each condition is held for the
// transition period after it was last observed, independently.
func TestNodeConditionsObservedSince(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi", "pid.available": "100"}, nil, nil, nil)
	h := newHarness(t, ts, nil, Config{PressureTransitionPeriod: time.Minute})
	h.stats.s = memSummary(500, nil)
	h.stats.s.PID = &PIDStats{MaxPID: 1000, NumProcesses: 100}
	h.sync(t)
	h.clock.Step(30 * time.Second)
	h.stats.s = memSummary(1500, nil)
	h.stats.s.PID = &PIDStats{MaxPID: 1000, NumProcesses: 950}
	h.sync(t)
	if got := h.m.NodeConditions(); len(got) != 2 {
		t.Fatalf("conditions %v", got)
	}
	h.clock.Step(31 * time.Second) // memory last seen 61s ago, pid 31s ago
	h.stats.s.PID.NumProcesses = 10
	h.sync(t)
	if got := h.m.NodeConditions(); len(got) != 1 || got[0] != v1.NodePIDPressure || h.m.IsUnderMemoryPressure() || !h.m.IsUnderPIDPressure() {
		t.Fatalf("conditions %v", got)
	}
}

// TestOrderedByExceedsRequestMemory and the rest of the memory ranking:
// over request first, then lower priority, then usage above request; no
// stats first.
func TestRankMemory(t *testing.T) {
	below := mkPod("below-requests", 0, "200Mi", "")
	above := mkPod("above-requests", 0, "100Mi", "")
	highAbove := mkPod("high-prio-above", 100, "100Mi", "")
	bigAbove := mkPod("big-above", 100, "100Mi", "")
	noStats := mkPod("no-stats", 1000, "", "")
	stats := map[types.UID]*PodStats{
		"below-requests":  {MemoryWorkingSetBytes: mi(150)},
		"above-requests":  {MemoryWorkingSetBytes: mi(150)},
		"high-prio-above": {MemoryWorkingSetBytes: mi(150)},
		"big-above":       {MemoryWorkingSetBytes: mi(900)},
	}
	pods := []*v1.Pod{below, highAbove, above, bigAbove, noStats}
	rank(pods, SignalMemoryAvailable, stats, false)
	if got := names(pods); got != "no-stats,above-requests,big-above,high-prio-above,below-requests" {
		t.Fatalf("order %s", got)
	}
}

func TestRankPID(t *testing.T) {
	pods := []*v1.Pod{mkPod("low-few", 0, "", ""), mkPod("high-many", 10, "", ""), mkPod("low-many", 0, "", "")}
	stats := map[types.UID]*PodStats{"low-few": {Processes: 1}, "high-many": {Processes: 500}, "low-many": {Processes: 50}}
	rank(pods, SignalPIDAvailable, stats, false)
	if got := names(pods); got != "low-many,low-few,high-many" {
		t.Fatalf("order %s", got)
	}
}

func TestRankDiskDedicatedImageFs(t *testing.T) {
	pods := []*v1.Pod{mkPod("layers", 0, "", ""), mkPod("logs", 0, "", "")}
	stats := map[types.UID]*PodStats{"layers": {RootfsBytes: mi(900)}, "logs": {LogsBytes: mi(100), VolumeBytes: mi(10)}}
	rank(pods, SignalNodeFsAvailable, stats, true)
	if names(pods) != "logs,layers" {
		t.Fatalf("nodefs order %s", names(pods))
	}
	rank(pods, SignalImageFsAvailable, stats, true)
	if names(pods) != "layers,logs" {
		t.Fatalf("imagefs order %s", names(pods))
	}
}

func TestStaleStatsDoNotAct(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, []*v1.Pod{mkPod("a", 0, "", "")}, Config{})
	h.stats.s = memSummary(100, map[string]uint64{"a": 1})
	h.stats.s.Time = h.clock.Now()
	if names(h.sync(t)) != "a" {
		t.Fatal("want eviction")
	}
	h.clock.Step(10 * time.Second) // same stats timestamp: no second eviction
	if got := h.sync(t); got != nil {
		t.Fatalf("acted on stale stats: %v", names(got))
	}
}

func TestKillErrorStillCounts(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, []*v1.Pod{mkPod("a", 0, "", ""), mkPod("b", 0, "", "")}, Config{})
	h.m.cfg.KillPod = func(context.Context, *v1.Pod, v1.PodStatus, int64) error { return errors.New("boom") }
	h.stats.s = memSummary(100, map[string]uint64{"a": 1, "b": 2})
	if got := h.sync(t); len(got) != 1 {
		t.Fatalf("evicted %v, want exactly one", names(got))
	}
}

func TestNewValidates(t *testing.T) {
	_, err := New(Config{PressureTransitionPeriod: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatal(err)
	}
	for _, field := range []string{"Stats", "ActivePods", "KillPod", "PressureTransitionPeriod"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
}

func TestStatsError(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, nil, Config{})
	if _, err := h.m.SyncOnce(t.Context()); !errors.Is(err, ErrStats) {
		t.Fatalf("err = %v", err)
	}
}

// TestRun: Run cycles every Interval on the clock, refuses a second Run and
// returns once ctx is done.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	ts := mustParse(t, map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, nil, Config{Interval: 10 * time.Second})
	calls := make(chan struct{}, 10)
	h.m.cfg.Stats = statsFunc(func() *Summary { calls <- struct{}{}; return memSummary(3000, nil) })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.m.Run(ctx) }()
	<-calls
	for !h.clock.HasWaiters() {
		runtime.Gosched()
	}
	if err := h.m.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run: %v", err)
	}
	h.clock.Step(10 * time.Second)
	<-calls
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
}
