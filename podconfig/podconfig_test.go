package podconfig

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)

func newTestConfig(t testing.TB, mode Mode, sources ...string) (*PodConfig, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	c, err := New(Config{Mode: mode, Sources: sources, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return c, clk
}

func mkPod(uid, name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: name, Namespace: "ns"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "img:1"}}},
	}
}

func set(pods ...*v1.Pod) kubetypes.PodUpdate {
	return kubetypes.PodUpdate{Op: kubetypes.SET, Pods: pods}
}

// summary renders updates as "OP(source):uid,uid OP2(...)..." for comparison.
func summary(us []kubetypes.PodUpdate) string {
	var parts []string
	for _, u := range us {
		uids := make([]string, len(u.Pods))
		for i, p := range u.Pods {
			uids[i] = string(p.UID)
		}
		parts = append(parts, fmt.Sprintf("%s(%s):%s", u.Op, u.Source, strings.Join(uids, ",")))
	}
	return strings.Join(parts, " ")
}

func expect(t *testing.T, got []kubetypes.PodUpdate, want string) {
	t.Helper()
	if s := summary(got); s != want {
		t.Errorf("got  %q\nwant %q", s, want)
	}
}

func TestInitialEmptySet(t *testing.T) {
	c, _ := newTestConfig(t, Incremental, "test")
	expect(t, c.Merge("test", set()), "ADD(test):")
	expect(t, c.Merge("test", set()), "")
	if !c.SeenAllSources() {
		t.Error("source not seen after an empty SET")
	}
}

func TestNewPodAddedOrderAndFirstSet(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	expect(t, c.Merge("test", set(mkPod("a", "a"), mkPod("b", "b"), mkPod("c", "c"))), "ADD(test):a,b,c")
	a := mkPod("a", "a")
	a.Spec.Containers[0].Image = "img:2"
	expect(t, c.Merge("test", set(a, mkPod("c", "c"), mkPod("d", "d"))), "REMOVE(test):b ADD(test):d UPDATE(test):a")
}

func TestNewPodAddedSetReconciled(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	c.Merge("test", set(mkPod("a", "a")))
	p := mkPod("a", "a")
	p.Status.Phase = v1.PodRunning
	got := c.Merge("test", set(p))
	expect(t, got, "RECONCILE(test):a")
	if got[0].Pods[0].Status.Phase != v1.PodRunning {
		t.Errorf("reconciled pod has phase %q", got[0].Pods[0].Status.Phase)
	}
	p = mkPod("a", "a")
	p.Status.Phase = v1.PodFailed
	p.Spec.Containers[0].Image = "img:9"
	expect(t, c.Merge("test", set(p)), "UPDATE(test):a")
	if st := c.MergedState()[0]; st.Status.Phase != v1.PodFailed || st.Spec.Containers[0].Image != "img:9" {
		t.Errorf("state not updated: %+v", st)
	}
}

func TestNewPodAddedDelete(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	c.Merge("test", set(mkPod("a", "a")))
	p := mkPod("a", "a")
	now := metav1.NewTime(t0)
	grace := int64(30)
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	expect(t, c.Merge("test", set(p)), "DELETE(test):a")
	expect(t, c.Merge("test", set(p)), "")
}

func TestNewPodAddedUpdatedRemoved(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	c.Merge("test", set(mkPod("a", "a"), mkPod("b", "b")))
	expect(t, c.Merge("test", set(mkPod("a", "a"), mkPod("b", "b"))), "")
	expect(t, c.Merge("test", set()), "REMOVE(test):a,b")
	if n := len(c.MergedState()); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

func TestPodUpdateAnnotationsAndLabels(t *testing.T) {
	c, clk := newTestConfig(t, Incremental)
	first := c.Merge("test", set(mkPod("a", "a")))
	seen := first[0].Pods[0].Annotations[kubetypes.ConfigSeenAnnotation]
	if seen != t0.Format(time.RFC3339Nano) || first[0].Pods[0].Annotations[kubetypes.ConfigSourceAnnotation] != "test" {
		t.Fatalf("annotations on add: %v", first[0].Pods[0].Annotations)
	}
	clk.Step(time.Minute)

	// Only local annotations differ: nothing.
	p := mkPod("a", "a")
	p.Annotations = map[string]string{kubetypes.ConfigSeenAnnotation: "other", kubetypes.ConfigSourceAnnotation: "x", kubetypes.ConfigMirrorAnnotation: "m"}
	expect(t, c.Merge("test", set(p)), "")

	p = mkPod("a", "a")
	p.Annotations = map[string]string{"k": "v"}
	got := c.Merge("test", set(p))
	expect(t, got, "UPDATE(test):a")
	if a := got[0].Pods[0].Annotations; a["k"] != "v" || a[kubetypes.ConfigSeenAnnotation] != seen || a[kubetypes.ConfigSourceAnnotation] != "test" {
		t.Errorf("annotations after update: %v", a)
	}
	p = mkPod("a", "a")
	p.Annotations = map[string]string{"k": "v"}
	p.Labels = map[string]string{"l": "1"}
	expect(t, c.Merge("test", set(p)), "UPDATE(test):a")
	p = mkPod("a", "a")
	p.Annotations = map[string]string{"k": "v"}
	p.Labels = map[string]string{"l": "1"}
	expect(t, c.Merge("test", set(p)), "")
	p.Labels = nil
	expect(t, c.Merge("test", set(p)), "UPDATE(test):a")
}

func TestPodUpdateDuplicateDropped(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	dupName := mkPod("b", "a") // same ns/name as a, other UID
	dupUID := mkPod("a", "z")
	got := c.Merge("test", set(mkPod("a", "a"), dupName, dupUID, nil, mkPod("", "nouid"), mkPod("../x", "bad"), mkPod("c", "c")))
	expect(t, got, "ADD(test):a,c")
	// Again on a source with state: the first of two same-UID pods wins
	// (here a spec change), the second is dropped, c stays.
	a2 := mkPod("a", "a")
	a2.Spec.Containers[0].Image = "img:2"
	got = c.Merge("test", set(a2, mkPod("a", "z"), mkPod("c", "c")))
	expect(t, got, "UPDATE(test):a")
	if len(got) == 1 && got[0].Pods[0].Spec.Containers[0].Image != "img:2" {
		t.Errorf("the second same-UID pod won: %v", got[0].Pods[0].Spec.Containers[0].Image)
	}
	// Incremental ops check UIDs in the filter.
	expect(t, c.Merge("test", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{mkPod("d", "d"), mkPod("d", "e")}}), "ADD(test):d")
	if n := len(c.MergedState()); n != 3 {
		t.Errorf("stored %d pods, want 3 (a, c, d)", n)
	}
}

func TestIncrementalOpsFromSource(t *testing.T) {
	c, _ := newTestConfig(t, Incremental, "src")
	expect(t, c.Merge("src", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{mkPod("a", "a")}}), "ADD(src):a")
	if c.Seen("src") {
		t.Error("an ADD made the source seen")
	}
	expect(t, c.Merge("src", kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{mkPod("b", "b")}}), "ADD(src):b")
	p := mkPod("a", "a")
	p.Labels = map[string]string{"x": "y"}
	expect(t, c.Merge("src", kubetypes.PodUpdate{Op: kubetypes.UPDATE, Pods: []*v1.Pod{p}}), "UPDATE(src):a")
	expect(t, c.Merge("src", kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{mkPod("a", "")}}), "REMOVE(src):a")
	expect(t, c.Merge("src", kubetypes.PodUpdate{Op: kubetypes.REMOVE, Pods: []*v1.Pod{mkPod("a", "")}}), "")
	// A first SET after incremental ops: b stays (unchanged), so only the readiness ADD.
	expect(t, c.Merge("src", set(mkPod("b", "b"))), "ADD(src):")
	if !c.Seen("src") {
		t.Error("SET did not make the source seen")
	}
}

func TestSourcesAreSeparate(t *testing.T) {
	c, _ := newTestConfig(t, Incremental, "one", "two")
	expect(t, c.Merge("one", set(mkPod("a", "a"))), "ADD(one):a")
	if c.SeenAllSources() {
		t.Error("all seen with one of two")
	}
	if seen, all := c.SourcesReady(); all || len(seen) != 1 || seen[0] != "one" {
		t.Errorf("SourcesReady = %v %v", seen, all)
	}
	select {
	case <-c.Ready():
		t.Fatal("Ready closed early")
	default:
	}
	// A UID one source holds is refused for every other source (issue 23,
	// item 3); the other source is still seen.
	expect(t, c.Merge("two", set(mkPod("a", "a"))), "ADD(two):")
	if c.Refused() != 1 {
		t.Errorf("Refused() = %d, want 1", c.Refused())
	}
	if !c.SeenAllSources() {
		t.Error("not all seen")
	}
	select {
	case <-c.Ready():
	default:
		t.Fatal("Ready not closed")
	}
	expect(t, c.Merge("one", set()), "REMOVE(one):a")
	expect(t, c.Merge("two", set(mkPod("a", "a"))), "ADD(two):a")
	if st := c.MergedState(); len(st) != 1 || st[0].Annotations[kubetypes.ConfigSourceAnnotation] != "two" {
		t.Errorf("merged state %v", st)
	}
}

func TestSnapshotMode(t *testing.T) {
	c, _ := newTestConfig(t, Snapshot)
	expect(t, c.Merge("one", set()), "SET(*):")
	expect(t, c.Merge("two", set(mkPod("b", "b"))), "SET(*):b")
	expect(t, c.Merge("one", set(mkPod("a", "a"))), "SET(*):a,b")
	expect(t, c.Merge("one", set(mkPod("a", "a"))), "")
	p := mkPod("a", "a")
	p.Status.Phase = v1.PodRunning
	expect(t, c.Merge("one", set(p)), "SET(*):a,b")
	expect(t, c.Merge("two", set()), "SET(*):a")
}

func TestSnapshotAndUpdatesMode(t *testing.T) {
	c, _ := newTestConfig(t, SnapshotAndUpdates)
	expect(t, c.Merge("one", set(mkPod("a", "a"))), "SET(*):a")
	expect(t, c.Merge("two", set()), "SET(*):a")
	p := mkPod("a", "a")
	p.Spec.Containers[0].Image = "img:2"
	expect(t, c.Merge("one", set(p)), "UPDATE(one):a")
	p = p.DeepCopy()
	p.Status.Phase = v1.PodRunning
	expect(t, c.Merge("one", set(p)), "RECONCILE(one):a")
	q := p.DeepCopy()
	now := metav1.NewTime(t0)
	q.DeletionTimestamp = &now
	expect(t, c.Merge("one", set(q, mkPod("b", "b"))), "SET(*):a,b DELETE(one):a")
	expect(t, c.Merge("one", set(q)), "SET(*):a")
}

// The ownership contract: a source hands its pods over and PodConfig never
// writes into them; delivered pods and MergedState are the stored objects
// (shared, read-only), and a later change stores a new object instead of
// changing one a consumer may hold.
func TestOwnershipContract(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	in := mkPod("a", "a")
	got := c.Merge("test", set(in))
	expect(t, got, "ADD(test):a")
	added := got[0].Pods[0]
	if in.Annotations != nil {
		t.Errorf("merge wrote into the sender's pod: %v", in.Annotations)
	}
	if added == in || added.Annotations[kubetypes.ConfigSourceAnnotation] != "test" || added.Annotations[kubetypes.ConfigSeenAnnotation] == "" {
		t.Errorf("delivered pod is not a copy carrying the local annotations: %v", added.Annotations)
	}
	if st := c.MergedState(); len(st) != 1 || st[0] != added {
		t.Errorf("MergedState = %v, want the delivered object", st)
	}

	// A status change: RECONCILE with a new object; the one delivered
	// before keeps its status, and the sender's new pod is untouched.
	p2 := mkPod("a", "a")
	p2.Status.Phase = v1.PodRunning
	got = c.Merge("test", set(p2))
	expect(t, got, "RECONCILE(test):a")
	rec := got[0].Pods[0]
	if rec == added || added.Status.Phase != "" || rec.Status.Phase != v1.PodRunning {
		t.Errorf("reconcile changed the delivered object in place: old %q new %q", added.Status.Phase, rec.Status.Phase)
	}
	if rec.Annotations[kubetypes.ConfigSeenAnnotation] != added.Annotations[kubetypes.ConfigSeenAnnotation] || p2.Annotations != nil {
		t.Errorf("config.seen not kept or sender's pod written: %v / %v", rec.Annotations, p2.Annotations)
	}

	// A spec change: UPDATE with a new object, same config.seen.
	p3 := p2.DeepCopy()
	p3.Spec.Containers[0].Image = "img:2"
	got = c.Merge("test", set(p3))
	expect(t, got, "UPDATE(test):a")
	upd := got[0].Pods[0]
	if rec.Spec.Containers[0].Image != "img:1" || upd.Spec.Containers[0].Image != "img:2" {
		t.Errorf("update changed the delivered object in place")
	}
	if upd.Annotations[kubetypes.ConfigSeenAnnotation] != added.Annotations[kubetypes.ConfigSeenAnnotation] {
		t.Errorf("config.seen changed on update: %v", upd.Annotations)
	}
	// An equal resend: nothing.
	expect(t, c.Merge("test", set(p3.DeepCopy())), "")
}

func TestChannels(t *testing.T) {
	c, _ := newTestConfig(t, Incremental)
	a, err := c.Channel("one")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Channel("one")
	other, _ := c.Channel("two")
	if a != b {
		t.Error("same name gave different channels")
	}
	if a == other {
		t.Error("different names gave the same channel")
	}
	if _, err := c.Channel(""); !errors.Is(err, ErrInvalidSource) {
		t.Errorf("empty name: %v", err)
	}
	if _, err := c.Channel(kubetypes.SourceAll); !errors.Is(err, ErrInvalidSource) {
		t.Errorf("reserved name: %v", err)
	}
	if c.SeenAllSources() {
		t.Error("channels' sources count as seen before any update")
	}
}

func TestNewValidates(t *testing.T) {
	for _, cfg := range []Config{{Mode: Mode(9)}, {UpdatesBuffer: -1}, {Sources: []string{""}}} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v", cfg, err)
		}
	}
}

func recv(t *testing.T, ch <-chan kubetypes.PodUpdate) kubetypes.PodUpdate {
	t.Helper()
	select {
	case u, ok := <-ch:
		if !ok {
			t.Fatal("updates closed")
		}
		return u
	case <-time.After(10 * time.Second):
		t.Fatal("no update within 10s")
	}
	return kubetypes.PodUpdate{}
}

func TestRunDeliversInOrderAndStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, _ := newTestConfig(t, Incremental)
	one, _ := c.Channel("one")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	one <- set(mkPod("a", "a"), mkPod("b", "b"))
	two, _ := c.Channel("two") // created while running
	two <- set()
	one <- set(mkPod("b", "b"), mkPod("c", "c"))
	got := []kubetypes.PodUpdate{recv(t, c.Updates()), recv(t, c.Updates()), recv(t, c.Updates()), recv(t, c.Updates())}
	// Run selects over the sources' channels, so nothing orders updates of
	// different sources; each source's own updates keep their order, and
	// every one is delivered.
	bySource := map[string][]kubetypes.PodUpdate{}
	for _, u := range got {
		bySource[u.Source] = append(bySource[u.Source], u)
	}
	expect(t, bySource["one"], "ADD(one):a,b REMOVE(one):a ADD(one):c")
	expect(t, bySource["two"], "ADD(two):")
	if len(bySource) != 2 {
		t.Errorf("updates from sources %v, want one and two", slices.Sorted(maps.Keys(bySource)))
	}
	c.Sync()
	expect(t, []kubetypes.PodUpdate{recv(t, c.Updates())}, "SET(*):b,c")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	for range c.Updates() {
	}
	if err := c.Run(t.Context()); !errors.Is(err, ErrAlreadyRan) {
		t.Errorf("Run after stop: %v", err)
	}
}

// TestConstructorsReportEveryProblem: New and the source constructors name
// every bad field at once, not only the first.
func TestConstructorsReportEveryProblem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		names []string
	}{
		{"New", second(New(Config{Mode: 99, UpdatesBuffer: -1, Sources: []string{"file", ""}})),
			[]string{"Mode", "UpdatesBuffer", "Sources[1]"}},
		{"NewFileSource", second(NewFileSource(FileSourceConfig{Period: -1})),
			[]string{"Path", "NodeName", "Out", "Period"}},
		{"NewHTTPSource", second(NewHTTPSource(HTTPSourceConfig{URL: "ftp://", Header: map[string][]string{"bad name": {"x"}}, MaxBodyBytes: -1})),
			[]string{"scheme", "no host", "NodeName", "Out", "Header name", "MaxBodyBytes"}},
		{"NewPushHandler", second(NewPushHandler(PushConfig{MaxPods: -1})),
			[]string{"NodeName", "Out", "MaxPods"}},
	} {
		if !errors.Is(tc.err, ErrInvalidConfig) {
			t.Errorf("%s = %v, want ErrInvalidConfig", tc.name, tc.err)
			continue
		}
		for _, n := range tc.names {
			if !strings.Contains(tc.err.Error(), n) {
				t.Errorf("%s = %v: %q not named", tc.name, tc.err, n)
			}
		}
	}
	if err := second(New(Config{Sources: []string{""}})); !errors.Is(err, ErrInvalidSource) {
		t.Errorf("New with an empty source = %v, want ErrInvalidSource too", err)
	}
}

func second[T any](_ T, err error) error { return err }
