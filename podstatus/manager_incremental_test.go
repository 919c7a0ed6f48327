package podstatus

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// stManyPods caches a running status for n pods and syncs them once.
func stManyPods(t testing.TB, m *Manager, n int) []*v1.Pod {
	t.Helper()
	pods := make([]*v1.Pod, n)
	for i := range pods {
		p := stPod()
		p.Name = fmt.Sprintf("web-%d", i)
		p.UID = types.UID(fmt.Sprintf("uid-%04d", i))
		pods[i] = p
		m.SetPodStatus(p, stRunningStatus())
	}
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	return pods
}

// SyncOnce only offers the statuses that changed since the last sync;
// ResyncAll looks at every pod but sends none that the sink already has.
func TestStatusSyncOnceOnlyChanged(t *testing.T) {
	sink := &stFlakySink{}
	m, _ := stManager(t, sink)
	pods := stManyPods(t, m, 1000)
	if got := sink.calls(); got != 1000 {
		t.Fatalf("first sync: %d calls, want 1000", got)
	}
	if len(m.pending) != 0 {
		t.Fatalf("%d pods still pending after a clean sync", len(m.pending))
	}
	if err := m.SyncOnce(t.Context()); err != nil || sink.calls() != 1000 {
		t.Fatalf("unchanged pods resent: %d calls (%v)", sink.calls()-1000, err)
	}
	if err := m.ResyncAll(t.Context()); err != nil || sink.calls() != 1000 {
		t.Fatalf("full resync resent unchanged pods: %d calls (%v)", sink.calls()-1000, err)
	}

	st := stRunningStatus()
	st.ContainerStatuses[0].RestartCount = 3
	m.SetPodStatus(pods[500], st)
	m.SetPodStatus(pods[7], stRunningStatus()) // no change: no new version
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.calls(); got != 1001 {
		t.Fatalf("one changed pod: %d calls, want 1", got-1000)
	}
	if sink.got[1000].ContainerStatuses[0].RestartCount != 3 {
		t.Fatalf("sent %+v", sink.got[1000])
	}
	if err := m.SyncOnce(t.Context()); err != nil || sink.calls() != 1001 {
		t.Fatalf("changed pod resent: %d calls (%v)", sink.calls(), err)
	}
}

// stCountingActivity counts the pods the manager looks at in a sync.
type stCountingActivity struct{ asked int }

func (a *stCountingActivity) CouldHaveRunningContainers(types.UID) bool { a.asked++; return false }

// SyncOnce's work grows with the changed pods, not with all pods.
func TestStatusSyncOnceLooksOnlyAtChanged(t *testing.T) {
	act := &stCountingActivity{}
	m, err := New(Config{Sink: &stFlakySink{}, ContainerActivity: act})
	if err != nil {
		t.Fatal(err)
	}
	pods := stManyPods(t, m, 1000)
	act.asked = 0
	st := stRunningStatus()
	st.ContainerStatuses[0].RestartCount = 1
	m.SetPodStatus(pods[1], st)
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if act.asked != 1 {
		t.Fatalf("SyncOnce looked at %d pods for one change", act.asked)
	}
	act.asked = 0
	if err := m.ResyncAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if act.asked != 1000 {
		t.Fatalf("ResyncAll looked at %d pods, want 1000", act.asked)
	}
}

// A refused status is offered again by the next SyncOnce, without a new
// change, and only it.
func TestStatusSyncOnceRetriesRefused(t *testing.T) {
	sink := &stFlakySink{}
	m, _ := stManager(t, sink)
	pods := stManyPods(t, m, 10)
	st := stRunningStatus()
	st.ContainerStatuses[0].RestartCount = 1
	m.SetPodStatus(pods[3], st)
	sink.mu.Lock()
	sink.failing = true
	sink.mu.Unlock()
	if err := m.SyncOnce(t.Context()); err == nil {
		t.Fatal("refusal not reported")
	}
	sink.mu.Lock()
	sink.failing = false
	sink.mu.Unlock()
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := sink.calls(); got != 11 || sink.got[10].ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("retry: %d calls", got)
	}
}

// A forgotten pod's sent record goes with the next sync.
func TestStatusSyncOnceForgetsOrphans(t *testing.T) {
	sink := &stFlakySink{}
	m, _ := stManager(t, sink)
	pods := stManyPods(t, m, 3)
	m.RemoveOrphanedStatuses(map[types.UID]bool{pods[0].UID: true})
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	m.syncMu.Lock()
	n := len(m.sent)
	m.syncMu.Unlock()
	if n != 1 {
		t.Fatalf("sent records: %d, want 1", n)
	}
}

// stMutatingSink scribbles over everything it gets.
type stMutatingSink struct{ calls int }

func (s *stMutatingSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.calls++
	pod.Name = "scribbled"
	pod.Status.Phase = v1.PodFailed
	for i := range st.ContainerStatuses {
		st.ContainerStatuses[i].Ready = false
		st.ContainerStatuses[i].Name = "scribbled"
	}
	for i := range st.Conditions {
		st.Conditions[i].Status = v1.ConditionUnknown
	}
	return nil
}

// The sink gets copies: what it does to them changes neither the cache nor
// what the manager remembers having sent.
func TestStatusSinkGetsCopies(t *testing.T) {
	sink := &stMutatingSink{}
	m, _ := stManager(t, sink)
	pod := stPod()
	m.SetPodStatus(pod, stRunningStatus())
	if err := m.SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	got, _ := m.GetPodStatus(pod.UID)
	if got.ContainerStatuses[0].Name != "a" || !got.ContainerStatuses[0].Ready || got.Phase != v1.PodRunning {
		t.Fatalf("cache changed by the sink: %+v", got)
	}
	if err := m.ResyncAll(t.Context()); err != nil || sink.calls != 1 {
		t.Fatalf("resync after a scribbling sink: %d calls (%v)", sink.calls, err)
	}
}

func TestStatusPodPhase(t *testing.T) {
	m, _ := stManager(t, NewMemorySink())
	if _, ok := m.PodPhase("nope"); ok {
		t.Fatal("phase of an unknown pod")
	}
	pod := stPod()
	m.SetPodStatus(pod, stRunningStatus())
	if ph, ok := m.PodPhase(pod.UID); !ok || ph != v1.PodRunning {
		t.Fatalf("phase %q %v", ph, ok)
	}
}

func BenchmarkStatusSyncOnceUnchanged(b *testing.B) {
	b.ReportAllocs()
	m, err := New(Config{Sink: &stFlakySink{}})
	if err != nil {
		b.Fatal(err)
	}
	pods := stManyPods(b, m, 1000)
	st := stRunningStatus()
	b.ResetTimer()
	for i := range b.N {
		st.ContainerStatuses[0].RestartCount = int32(i + 1)
		m.SetPodStatus(pods[i%len(pods)], st)
		if err := m.SyncOnce(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
