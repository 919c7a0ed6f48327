package podworkers

import (
	"reflect"
	"strconv"
	"testing"
	"testing/synctest"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func (e *env) staticState() (map[string]types.UID, map[string][]types.UID) {
	e.p.mu.Lock()
	defer e.p.mu.Unlock()
	started := map[string]types.UID{}
	for k, v := range e.p.startedStatic {
		started[k] = v
	}
	waiting := map[string][]types.UID{}
	for k, v := range e.p.waitingStatic {
		waiting[k] = append([]types.UID(nil), v...)
	}
	return started, waiting
}

func (e *env) expectStatic(started map[string]types.UID, waiting map[string][]types.UID) {
	e.t.Helper()
	s, w := e.staticState()
	if !reflect.DeepEqual(s, started) || !reflect.DeepEqual(w, waiting) {
		e.t.Fatalf("started %v waiting %v, want %v and %v", s, w, started, waiting)
	}
}

func TestStaticPodExclusion(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		q := e.p.WorkQueue()
		// An API pod and a static pod with the same full name both run: only
		// static pods exclude each other.
		e.update(SyncPodUpdate, newPod("1-normal", "pod1"))
		e.update(SyncPodUpdate, newStatic("2-static", "pod1"))
		e.expectHistory("1-normal", "1-normal:sync(update)")
		e.expectHistory("2-static", "2-static:sync(update)")
		e.expectStatic(map[string]types.UID{"pod1_ns": "2-static"}, map[string][]types.UID{})

		// Two more static pods of that name wait, in order, and are requeued.
		e.update(SyncPodUpdate, newStatic("3-static", "pod1"))
		e.update(SyncPodUpdate, newStatic("4-static", "pod1"))
		e.expectHistory("3-static")
		e.expectHistory("4-static")
		e.expectStatic(map[string]types.UID{"pod1_ns": "2-static"}, map[string][]types.UID{"pod1_ns": {"3-static", "4-static"}})
		for _, uid := range []types.UID{"1-normal", "2-static", "3-static", "4-static"} {
			if _, ok := q.dueTime(uid); !ok {
				t.Fatalf("%s not queued", uid)
			}
		}
		if e.p.IsPodTerminationRequested("3-static") || !e.p.CouldHaveRunningContainers("3-static") {
			t.Fatal("a waiting static pod is neither terminating nor stopped")
		}

		// Another update of a waiting pod still does not start it.
		e.update(SyncPodUpdate, newStatic("3-static", "pod1"))
		e.expectHistory("3-static")

		// A static pod of another name runs at once.
		e.update(SyncPodCreate, newStatic("5-static", "pod2"))
		e.expectHistory("5-static", "5-static:sync(create)")

		// Killing a waiting pod finishes it without any sync and takes it
		// out of the line (nothing is kept for a pod that is gone).
		e.update(SyncPodKill, newStatic("3-static", "pod1"))
		e.expectHistory("3-static")
		if !e.p.ShouldPodBeFinished("3-static") || !e.p.IsPodKnownTerminated("3-static") {
			t.Fatal("killed waiting static pod not finished")
		}
		e.expectStatic(map[string]types.UID{"pod1_ns": "2-static", "pod2_ns": "5-static"}, map[string][]types.UID{"pod1_ns": {"4-static"}})

		// While 2-static terminates, 4-static still waits.
		e.syncer.blockOn("terminating", "2-static")
		e.update(SyncPodKill, newStatic("2-static", "pod1"))
		e.update(SyncPodUpdate, newStatic("4-static", "pod1"))
		e.expectHistory("4-static")
		if !e.p.IsPodForMirrorPodTerminatingByFullName("pod1_ns") {
			t.Fatal("the terminating static pod's mirror should be kept")
		}
		e.syncer.unblock("terminating", "2-static")
		synctest.Wait()
		e.expectHistory("2-static", "2-static:sync(update)", "2-static:terminating(30)", "2-static:terminated")
		if e.p.IsPodForMirrorPodTerminatingByFullName("pod1_ns") {
			t.Fatal("a stopped static pod's mirror may go")
		}
		e.expectStatic(map[string]types.UID{"pod2_ns": "5-static"}, map[string][]types.UID{"pod1_ns": {"4-static"}})

		// Now 4-static starts on its next update.
		e.update(SyncPodSync, newStatic("4-static", "pod1"))
		e.expectHistory("4-static", "4-static:sync(sync)")
		e.expectStatic(map[string]types.UID{"pod1_ns": "4-static", "pod2_ns": "5-static"}, map[string][]types.UID{})
	})
}

func TestStaticPodExclusionFIFO(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newStatic("a", "web"))
		e.update(SyncPodCreate, newStatic("b", "web"))
		e.update(SyncPodCreate, newStatic("c", "web"))
		e.update(SyncPodKill, newStatic("a", "web"))
		// c asks before b, but b came first.
		e.update(SyncPodSync, newStatic("c", "web"))
		e.expectHistory("c")
		e.update(SyncPodSync, newStatic("b", "web"))
		e.expectHistory("b", "b:sync(sync)")
		e.expectStatic(map[string]types.UID{"web_ns": "b"}, map[string][]types.UID{"web_ns": {"c"}})
		// A deleted pod that never started leaves the line.
		e.update(SyncPodUpdate, deleted(newStatic("c", "web"), nil))
		e.expectHistory("c")
		e.update(SyncPodKill, newStatic("b", "web"))
		e.update(SyncPodCreate, newStatic("d", "web"))
		e.expectHistory("d", "d:sync(create)")
		e.expectStatic(map[string]types.UID{"web_ns": "d"}, map[string][]types.UID{})
	})
}

func TestStaticPodSourceAnnotation(t *testing.T) {
	for _, tc := range []struct {
		ann  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{kubetypes.ConfigSourceAnnotation: "api"}, false},
		{map[string]string{kubetypes.ConfigSourceAnnotation: "file"}, true},
		{map[string]string{kubetypes.ConfigSourceAnnotation: "http"}, true},
	} {
		p := &v1.Pod{}
		p.Annotations = tc.ann
		if got := kubetypes.IsStaticPod(p); got != tc.want {
			t.Errorf("%v: static %v, want %v", tc.ann, got, tc.want)
		}
	}
	if kubetypes.IsStaticPod(nil) {
		t.Error("nil pod is static")
	}
}

func TestSyncKnownPods(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		const n = 20
		for i := range n {
			e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: newPod(strconv.Itoa(i), "name")})
		}
		synctest.Wait()
		if e.workerCount() != n {
			t.Fatalf("%d workers, want %d", e.workerCount(), n)
		}
		desired := []*v1.Pod{newPod("2", "name"), newPod("14", "name")}
		// Kill all but the desired; even ones are deleted, odd ones only killed.
		for i := range n {
			if i == 2 || i == 14 {
				continue
			}
			pod := newPod(strconv.Itoa(i), "name")
			if i%2 == 0 {
				pod = deleted(pod, nil)
			}
			e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
		}
		synctest.Wait()

		type q struct {
			terminating, requested, couldRun, content bool
		}
		check := func(uid types.UID, want q) {
			t.Helper()
			got := q{e.p.ShouldPodContainersBeTerminating(uid), e.p.IsPodTerminationRequested(uid), e.p.CouldHaveRunningContainers(uid), e.p.ShouldPodContentBeRemoved(uid)}
			if got != want {
				t.Fatalf("%s: %+v, want %+v", uid, got, want)
			}
		}
		check("0", q{terminating: true, requested: true, content: true})
		check("1", q{terminating: true, requested: true})
		check("2", q{couldRun: true})
		// Unknown before the first SyncKnownPods: it might run.
		check("abc", q{couldRun: true})
		if e.p.ShouldPodBeFinished("abc") || e.p.ShouldPodRuntimeBeRemoved("abc") {
			t.Fatal("unknown pod finished before SyncKnownPods")
		}

		known := e.p.SyncKnownPods(desired)
		if e.workerCount() != 2 || len(known) != 2 {
			t.Fatalf("%d workers, known %v; want 2", e.workerCount(), known)
		}
		for _, uid := range []types.UID{"2", "14"} {
			if got := known[uid]; got != (KnownPod{State: SyncPod, HasConfig: true}) {
				t.Fatalf("%s: %+v", uid, got)
			}
		}
		// Unknown after it: known not to run.
		check("abc", q{terminating: true, content: true})
		if !e.p.ShouldPodBeFinished("abc") || !e.p.ShouldPodRuntimeBeRemoved("abc") {
			t.Fatal("unknown pod not finished after SyncKnownPods")
		}

		// Desired pods that vanish from config are stopped, not dropped.
		e.syncer.blockOn("terminating", "2")
		known = e.p.SyncKnownPods(nil)
		if got := known["2"]; got != (KnownPod{State: TerminatingPod, Orphan: true, HasConfig: true}) {
			t.Fatalf("orphan running pod: %+v", got)
		}
		e.syncer.unblock("terminating", "2")
		synctest.Wait()
		e.expectHistory("14", "14:sync(update)", "14:terminating(30)", "14:terminated")
		if e.workerCount() != 0 {
			t.Fatalf("%d workers left", e.workerCount())
		}
		e.p.mu.Lock()
		kept := len(e.p.statuses)
		e.p.mu.Unlock()
		if kept != 2 {
			t.Fatalf("%d statuses, want 2 (finished, not yet forgotten)", kept)
		}
		// Finished pods ignore further kills, and go at the next call.
		e.update(SyncPodKill, newPod("2", "name"))
		if known := e.p.SyncKnownPods(nil); len(known) != 0 {
			t.Fatalf("known %v, want none", known)
		}
		e.p.mu.Lock()
		kept = len(e.p.statuses)
		e.p.mu.Unlock()
		if kept != 0 {
			t.Fatalf("%d statuses left", kept)
		}
	})
}

func TestSyncKnownPodsOrphans(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		// A static pod waiting to start is an unstarted orphan: dropped.
		e.update(SyncPodCreate, newStatic("s1", "web"))
		e.update(SyncPodCreate, newStatic("s2", "web"))
		known := e.p.SyncKnownPods([]*v1.Pod{newStatic("s1", "web")})
		if _, ok := known["s2"]; ok || len(known) != 1 {
			t.Fatalf("known %v", known)
		}
		if got := known["s1"]; got != (KnownPod{State: SyncPod, HasConfig: true, Static: true}) {
			t.Fatalf("s1: %+v", got)
		}
		synctest.Wait()
		e.expectHistory("s2")
		// A running pod given a shorter deletion grace earlier keeps it.
		pod := newPod("r", "run")
		pod.Spec.TerminationGracePeriodSeconds = i64(7)
		e.update(SyncPodCreate, pod)
		e.p.SyncKnownPods([]*v1.Pod{newStatic("s1", "web")})
		synctest.Wait()
		e.expectHistory("r", "r:sync(create)", "r:terminating(7)", "r:terminated")
		if !e.p.ShouldPodContentBeRemoved("r") {
			t.Fatal("an orphan counts as deleted")
		}
	})
}
