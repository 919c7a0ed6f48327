package podworkers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// The pod workers answer the runtime's garbage-collection questions.
var _ kubetypes.PodStateProvider = (*Workers)(nil)

func TestUpdatePod(t *testing.T) {
	type check struct {
		state                                                 State
		terminationRequested, knownTerminated, finished, gone bool
		contentRemovable                                      bool
	}
	cases := []struct {
		name    string
		cache   *kubetypes.PodStatus
		steps   func(e *env)
		uid     types.UID
		history []string
		want    check
	}{
		{
			name:    "a new pod is recorded and started",
			uid:     "1",
			steps:   func(e *env) { e.update(SyncPodCreate, newPod("1", "running-pod")) },
			history: []string{"1:sync(create)"},
			want:    check{state: SyncPod},
		},
		{
			name: "a RunningPod given with a Pod is ignored and the pod started",
			uid:  "1",
			steps: func(e *env) {
				e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("1", "running-pod"),
					RunningPod: &kubetypes.Pod{ID: "1", Name: "other", Namespace: "ns"}})
				synctest.Wait()
			},
			history: []string{"1:sync(create)"},
			want:    check{state: SyncPod},
		},
		{
			name: "a running pod terminates when the update has a deletionTimestamp",
			uid:  "1",
			steps: func(e *env) {
				e.update(SyncPodCreate, newPod("1", "running-pod"))
				e.update(SyncPodUpdate, deleted(newPod("1", "running-pod"), i64(20)))
			},
			history: []string{"1:sync(create)", "1:terminating(20)", "1:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true, contentRemovable: true},
		},
		{
			name: "a running pod terminates when an eviction is requested",
			uid:  "1",
			steps: func(e *env) {
				e.update(SyncPodCreate, newPod("1", "running-pod"))
				e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "running-pod"),
					KillPodOptions: &KillPodOptions{Evict: true, PodTerminationGracePeriodSecondsOverride: i64(3)}})
				synctest.Wait()
			},
			history: []string{"1:sync(create)", "1:terminating(3)", "1:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true, contentRemovable: true},
		},
		{
			name: "a killed (not evicted, not deleted) pod keeps its content",
			uid:  "1",
			steps: func(e *env) {
				e.update(SyncPodCreate, newPod("1", "running-pod"))
				e.update(SyncPodKill, newPod("1", "running-pod"))
			},
			history: []string{"1:sync(create)", "1:terminating(30)", "1:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true},
		},
		{
			name:  "a terminal pod never started is stopped when the runtime still runs it",
			uid:   "done",
			cache: runningStatus("done"),
			steps: func(e *env) {
				e.update(SyncPodCreate, withPhase(newPod("done", "done-pod"), v1.PodSucceeded))
			},
			history: []string{"done:terminating(30)", "done:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true},
		},
		{
			name:    "a terminal pod never started goes straight to terminated when the runtime runs nothing",
			uid:     "done",
			cache:   exitedStatus("done"),
			steps:   func(e *env) { e.update(SyncPodCreate, withPhase(newPod("done", "done-pod"), v1.PodFailed)) },
			history: []string{"done:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true},
		},
		{
			name: "an orphaned runtime pod is stopped and then forgotten",
			uid:  "orphan",
			steps: func(e *env) {
				e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &kubetypes.Pod{ID: "orphan", Name: "orphaned-pod", Namespace: "ns"}})
				synctest.Wait()
			},
			history: []string{"orphan:runtime"},
			want:    check{gone: true},
		},
		{
			name: "an orphaned runtime pod with a non-kill update does nothing",
			uid:  "orphan",
			steps: func(e *env) {
				e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, RunningPod: &kubetypes.Pod{ID: "orphan", Name: "orphaned-pod", Namespace: "ns"}})
				synctest.Wait()
			},
			want: check{gone: true},
		},
		{
			name: "SyncPod reporting the pod terminal moves it to terminating",
			uid:  "1",
			steps: func(e *env) {
				e.syncer.setTerminal("1")
				e.update(SyncPodCreate, newPod("1", "job"))
			},
			history: []string{"1:sync(create)", "1:terminating(30)", "1:terminated"},
			want:    check{state: TerminatedPod, terminationRequested: true, knownTerminated: true, finished: true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			withWorkers(t, Config{}, func(t *testing.T, e *env) {
				if tc.cache != nil {
					e.cache.set(tc.uid, tc.cache)
				}
				tc.steps(e)
				e.expectHistory(tc.uid, tc.history...)
				s := e.status(tc.uid)
				if tc.want.gone {
					if s != nil {
						t.Fatalf("status kept: %+v", s)
					}
					return
				}
				if s == nil {
					t.Fatal("no status")
				}
				got := check{
					state:                s.workType(),
					terminationRequested: e.p.IsPodTerminationRequested(tc.uid),
					knownTerminated:      e.p.IsPodKnownTerminated(tc.uid),
					finished:             e.p.ShouldPodBeFinished(tc.uid),
					contentRemovable:     e.p.ShouldPodContentBeRemoved(tc.uid),
				}
				if got != tc.want {
					t.Fatalf("state = %+v, want %+v", got, tc.want)
				}
				if got.knownTerminated == e.p.CouldHaveRunningContainers(tc.uid) {
					t.Fatalf("CouldHaveRunningContainers = %v with knownTerminated %v", !got.knownTerminated, got.knownTerminated)
				}
				if got.knownTerminated != e.p.ShouldPodRuntimeBeRemoved(tc.uid) {
					t.Fatalf("ShouldPodRuntimeBeRemoved disagrees with IsPodKnownTerminated")
				}
				if got.finished && e.workerCount() != 0 {
					t.Fatalf("finished pod still has a worker")
				}
			})
		})
	}
}

func TestUpdatePodRestartAfterTermination(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		pod := newPod("1", "web")
		e.update(SyncPodCreate, pod)
		e.update(SyncPodKill, pod)
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")

		// A create of the same UID while terminated is remembered, not run.
		e.update(SyncPodCreate, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")
		if s := e.status("1"); !s.restartRequested || !s.finished {
			t.Fatalf("status = %+v, want finished with restart requested", s)
		}
		// Other updates of a finished pod are ignored.
		e.update(SyncPodUpdate, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")

		// SyncKnownPods forgets it although it is desired; the next create starts it.
		known := e.p.SyncKnownPods([]*v1.Pod{pod})
		if _, ok := known["1"]; ok {
			t.Fatalf("SyncKnownPods kept the restarted pod: %v", known)
		}
		e.syncer.reset()
		e.update(SyncPodCreate, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)")
		if e.p.IsPodTerminationRequested("1") {
			t.Fatal("restarted pod still terminating")
		}
	})
}

func TestUpdatePodForRuntimePod(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		rp := &kubetypes.Pod{ID: "1", Name: "1", Namespace: "test"}
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, RunningPod: rp})
		synctest.Wait()
		if n := len(e.syncer.all()); n != 0 {
			t.Fatalf("calls for a non-kill runtime update: %v", e.syncer.all())
		}
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: rp})
		synctest.Wait()
		e.expectHistory("1", "1:runtime")
		if e.status("1") != nil || e.workerCount() != 0 {
			t.Fatal("runtime pod not forgotten")
		}
	})
}

func TestUpdatePodRuntimeKillOfKnownPodUsesSpec(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &kubetypes.Pod{ID: "1", Name: "web", Namespace: "ns"}})
		synctest.Wait()
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")
		if !e.p.ShouldPodContentBeRemoved("1") {
			t.Fatal("a runtime kill counts as a deletion")
		}
	})
}

func TestUpdatePodForTerminatedRuntimePod(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		block := e.syncer.blockOn("terminated", "1")
		e.update(SyncPodKill, newPod("1", "web"))
		// Stopped but not finished: a runtime kill is ignored.
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &kubetypes.Pod{ID: "1", Name: "web", Namespace: "ns"}})
		synctest.Wait()
		close(block)
		synctest.Wait()
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")
	})
}

func TestUpdatePodDoesNotForgetSyncPodKill(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		const n = 20
		for i := range n {
			pod := newPod(strconv.Itoa(i), strconv.Itoa(i))
			e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
			e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
			e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: pod})
		}
		synctest.Wait()
		for i := range n {
			uid := types.UID(strconv.Itoa(i))
			got := fmt.Sprint(e.syncer.history(uid))
			short := fmt.Sprint([]string{string(uid) + ":terminating(30)", string(uid) + ":terminated"})
			long := fmt.Sprint([]string{string(uid) + ":sync(create)", string(uid) + ":terminating(30)", string(uid) + ":terminated"})
			if got != short && got != long {
				t.Fatalf("history of %s = %s", uid, got)
			}
		}
	})
}

func TestOnlyLatestPendingUpdateIsKept(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		release := e.syncer.blockOn("sync", "1")
		e.update(SyncPodCreate, newPod("1", "web"))
		e.update(SyncPodUpdate, newPod("1", "web"))
		e.update(SyncPodSync, newPod("1", "web"))
		e.syncer.unblock("sync", "1")
		_ = release
		synctest.Wait()
		e.expectHistory("1", "1:sync(create)", "1:sync(sync)")
	})
}

func TestCacheIsReadNewerThanLastSync(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		first := time.Now() // the bubble's clock stands still while goroutines run
		e.update(SyncPodSync, newPod("1", "web"))
		e.cache.mu.Lock()
		asked := append([]time.Time(nil), e.cache.asked["1"]...)
		e.cache.mu.Unlock()
		if len(asked) != 2 || !asked[0].IsZero() || !asked[1].Equal(first) {
			t.Fatalf("GetNewerThan times = %v, want [zero %v]", asked, first)
		}
	})
}

// A syncer that marks when its last runtime change ended has the next sync
// wait for a status at least as new as that, not as the sync's end; a mark
// after the end is not taken.
func TestCacheIsReadNewerThanRuntimeSyncMark(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.syncer.mu.Lock()
		var marks []time.Time
		e.syncer.onSync = func(ctx context.Context, uid types.UID) {
			m := time.Now().Add(-time.Second)
			if len(marks) == 1 {
				m = time.Now().Add(time.Hour)
			}
			MarkRuntimeSynced(ctx, m)
			marks = append(marks, m)
		}
		e.syncer.mu.Unlock()
		e.update(SyncPodCreate, newPod("1", "web"))
		e.update(SyncPodSync, newPod("1", "web"))
		end := time.Now() // the bubble's clock stands still while goroutines run
		e.update(SyncPodSync, newPod("1", "web"))
		e.cache.mu.Lock()
		asked := append([]time.Time(nil), e.cache.asked["1"]...)
		e.cache.mu.Unlock()
		e.syncer.mu.Lock()
		defer e.syncer.mu.Unlock()
		if len(asked) != 3 || len(marks) != 3 || !asked[1].Equal(marks[0]) || !asked[2].Equal(end) {
			t.Fatalf("GetNewerThan times = %v, want [zero %v %v] (marks %v)", asked, marks[0], end, marks)
		}
	})
}

func TestCacheErrorBacksOff(t *testing.T) {
	withWorkers(t, Config{BackOffPeriod: 7 * time.Second}, func(t *testing.T, e *env) {
		e.cache.mu.Lock()
		e.cache.errs["1"] = errors.New("boom")
		e.cache.mu.Unlock()
		e.update(SyncPodCreate, newPod("1", "web"))
		if calls := e.syncer.all(); len(calls) != 0 {
			t.Fatalf("syncer called despite a cache error: %v", calls)
		}
		at, ok := e.p.WorkQueue().dueTime("1")
		if !ok || time.Until(at) != 7*time.Second {
			t.Fatalf("due in %v (queued %v), want 7s", time.Until(at), ok)
		}
		// The next update syncs normally.
		e.update(SyncPodSync, newPod("1", "web"))
		e.expectHistory("1", "1:sync(sync)")
	})
}

func TestCacheWaitIsInterruptedByTermination(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.cache.mu.Lock()
		e.cache.block["1"] = true
		e.cache.mu.Unlock()
		e.update(SyncPodCreate, newPod("1", "web"))
		e.cache.mu.Lock()
		e.cache.block["1"] = false
		e.cache.mu.Unlock()
		e.update(SyncPodKill, newPod("1", "web"))
		e.expectHistory("1", "1:terminating(30)", "1:terminated")
	})
}

func TestTerminationCancelsSyncInFlight(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.syncer.blockOn("sync", "1")
		e.update(SyncPodCreate, newPod("1", "web"))
		e.update(SyncPodKill, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminated")
		if e.syncer.cancelled["1"] != 1 {
			t.Fatalf("cancelled %d syncs, want 1", e.syncer.cancelled["1"])
		}
	})
}

func TestShorterGraceCancelsTerminating(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.syncer.blockOn("terminating", "1")
		e.update(SyncPodKill, newPod("1", "web"))
		// A longer grace does not interrupt.
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"),
			KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(60)}})
		synctest.Wait()
		if e.syncer.cancelled["1"] != 0 {
			t.Fatal("a longer grace cancelled the sync")
		}
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)")
		// A shorter one does, and the retry uses it.
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"),
			KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: i64(5)}})
		synctest.Wait()
		if e.syncer.cancelled["1"] != 1 {
			t.Fatalf("cancelled %d, want 1", e.syncer.cancelled["1"])
		}
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminating(5)")
		e.syncer.unblock("terminating", "1")
		synctest.Wait()
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminating(5)", "1:terminated")
	})
}

func TestTerminatingErrorRetriesUntilSuccess(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.syncer.setErr("1", errors.New("still running"))
		e.update(SyncPodKill, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)")
		if e.p.IsPodKnownTerminated("1") || !e.p.ShouldPodContainersBeTerminating("1") {
			t.Fatal("failed termination must leave the pod terminating")
		}
		// The sync loop re-sends the pod when the queue says so.
		e.update(SyncPodSync, newPod("1", "web"))
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminating(30)", "1:terminated")
	})
}

func TestKillCompletionChannels(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.syncer.blockOn("terminating", "1")
		ch1, ch2 := make(chan struct{}), make(chan struct{})
		fn1 := func(s *v1.PodStatus) { s.Reason = "Preempted" }
		fn2 := func(s *v1.PodStatus) { s.Reason = "Evicted" }
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"), KillPodOptions: &KillPodOptions{CompletedCh: ch1, PodStatusFunc: fn1}})
		synctest.Wait()
		// A second kill with a shorter grace interrupts; the retry gets its status func.
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"),
			KillPodOptions: &KillPodOptions{CompletedCh: ch2, PodStatusFunc: fn2, Evict: true, PodTerminationGracePeriodSecondsOverride: i64(10)}})
		// The same channel given twice is closed once.
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"), KillPodOptions: &KillPodOptions{CompletedCh: ch2}})
		synctest.Wait()
		for _, ch := range []chan struct{}{ch1, ch2} {
			select {
			case <-ch:
				t.Fatal("closed before the pod stopped")
			default:
			}
		}
		e.syncer.unblock("terminating", "1")
		synctest.Wait()
		<-ch1
		<-ch2
		e.expectHistory("1", "1:sync(create)", "1:terminating(30)", "1:terminating(10)", "1:terminated")
		fns := e.syncer.statusFns
		if len(fns) != 2 {
			t.Fatalf("%d status funcs handed over, want 2", len(fns))
		}
		var first, last v1.PodStatus
		fns[0](&first)
		fns[1](&last)
		if first.Reason != "Preempted" || last.Reason != "Evicted" {
			t.Fatalf("status funcs: first %q, last %q", first.Reason, last.Reason)
		}
		// As in the kubelet, only the kill that began the termination decides
		// whether it is an eviction.
		if e.p.ShouldPodContentBeRemoved("1") {
			t.Fatal("an eviction asked for after termination began was recorded")
		}
		// A kill of a stopped pod completes at once.
		ch3 := make(chan struct{})
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"), KillPodOptions: &KillPodOptions{CompletedCh: ch3}})
		<-ch3
		// Kill options on a pod that is not terminating complete at once too.
		ch4 := make(chan struct{})
		e.update(SyncPodCreate, newPod("2", "db"))
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: newPod("2", "db"), KillPodOptions: &KillPodOptions{CompletedCh: ch4}})
		<-ch4
	})
}

func TestKillPodAndWait(t *testing.T) {
	t.Run("returns once stopped", func(t *testing.T) {
		withWorkers(t, Config{}, func(t *testing.T, e *env) {
			e.update(SyncPodCreate, newPod("1", "web"))
			e.syncer.blockOn("terminating", "1")
			errc := make(chan error, 1)
			go func() { errc <- e.p.KillPodAndWait(t.Context(), newPod("1", "web"), true, i64(2), nil) }()
			synctest.Wait()
			select {
			case err := <-errc:
				t.Fatalf("returned %v before the pod stopped", err)
			default:
			}
			e.syncer.unblock("terminating", "1")
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			// KillPodAndWait returns once the containers are stopped (the
			// terminating sync completed), as the kubelet's eviction waits
			// for; the worker's terminated step (volume and cgroup cleanup)
			// may still be running then, so it is awaited separately.
			if got := e.syncer.history("1"); len(got) < 2 || got[1] != "1:terminating(2)" {
				t.Fatalf("returned with history %v, want the terminating sync done", got)
			}
			synctest.Wait()
			e.expectHistory("1", "1:sync(create)", "1:terminating(2)", "1:terminated")
			if !e.p.ShouldPodContentBeRemoved("1") {
				t.Fatal("eviction not recorded")
			}
		})
	})
	t.Run("times out after max(10s, 1.5 grace)", func(t *testing.T) {
		for _, tc := range []struct {
			grace *int64
			want  time.Duration
		}{{nil, 45 * time.Second}, {i64(2), 10 * time.Second}, {i64(20), 30 * time.Second}} {
			withWorkers(t, Config{}, func(t *testing.T, e *env) {
				e.update(SyncPodCreate, newPod("1", "web"))
				e.syncer.blockOn("terminating", "1")
				start := time.Now()
				err := e.p.KillPodAndWait(t.Context(), newPod("1", "web"), false, tc.grace, nil)
				if !errors.Is(err, ErrKillTimeout) || time.Since(start) != tc.want {
					t.Fatalf("err %v after %v, want timeout after %v", err, time.Since(start), tc.want)
				}
			})
		}
	})
	t.Run("bad input and stopped", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p, err := New(Config{Syncer: newFakeSyncer(), Cache: newFakeCache()})
			if err != nil {
				t.Fatal(err)
			}
			if err := p.KillPodAndWait(t.Context(), nil, false, nil, nil); !errors.Is(err, ErrInvalidUpdate) {
				t.Fatalf("nil pod: %v", err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			if err := p.Run(ctx); err != nil {
				t.Fatal(err)
			}
			if err := p.KillPodAndWait(t.Context(), newPod("1", "web"), false, nil, nil); !errors.Is(err, ErrStopped) {
				t.Fatalf("after stop: %v", err)
			}
		})
	})
}

func TestCalculateEffectiveGracePeriod(t *testing.T) {
	cases := []struct {
		desc                     string
		spec, deletion, override *int64
		current                  int64
		want                     int64
		shortened                bool
	}{
		{desc: "spec grace without overrides", spec: i64(30), want: 30},
		{desc: "deletion grace wins over spec", spec: i64(30), deletion: i64(5), want: 5},
		{desc: "override wins over deletion grace", spec: i64(30), deletion: i64(5), override: i64(2), want: 2},
		{desc: "zero deletion grace means 1", spec: i64(30), deletion: i64(0), want: 1},
		{desc: "zero override means 1", spec: i64(30), deletion: i64(5), override: i64(0), want: 1},
		{desc: "no grace anywhere means 1", want: 1},
		{desc: "grace never grows", spec: i64(30), override: i64(60), current: 10, want: 10},
		{desc: "shorter grace is reported", spec: i64(30), override: i64(3), current: 10, want: 3, shortened: true},
		{desc: "spec does not apply once a grace is in force", spec: i64(2), current: 10, want: 10},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			pod := newPod("1", "p")
			pod.Spec.TerminationGracePeriodSeconds = tc.spec
			pod.DeletionGracePeriodSeconds = tc.deletion
			got, short := calculateEffectiveGracePeriod(&podSyncStatus{gracePeriod: tc.current}, pod, &KillPodOptions{PodTerminationGracePeriodSecondsOverride: tc.override})
			if got != tc.want || short != tc.shortened {
				t.Fatalf("got %d (shortened %v), want %d (%v)", got, short, tc.want, tc.shortened)
			}
		})
	}
}

type backoffErr struct{ until time.Time }

func (b backoffErr) Error() string           { return "in back-off" }
func (b backoffErr) BackoffUntil() time.Time { return b.until }

func TestRequeueDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := 0.5
		p, err := New(Config{Syncer: newFakeSyncer(), Cache: newFakeCache(),
			ResyncInterval: time.Minute, BackOffPeriod: 10 * time.Second, Rand: func() float64 { return r }})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		cases := []struct {
			name       string
			transition bool
			err        error
			want       time.Duration // before jitter
		}{
			{name: "phase transition is immediate", transition: true, want: 0},
			{name: "success waits the resync interval", want: time.Minute},
			{name: "error waits the back-off period", err: errors.New("x"), want: 10 * time.Second},
			{name: "back-off error waits until its expiry", err: backoffErr{now.Add(20 * time.Second)}, want: 20 * time.Second},
			{name: "wrapped back-off error", err: fmt.Errorf("sync: %w", backoffErr{now.Add(3 * time.Second)}), want: 3 * time.Second},
			{name: "joined errors use the earliest expiry", err: errors.Join(errors.New("a"), backoffErr{now.Add(40 * time.Second)}, backoffErr{now.Add(15 * time.Second)}), want: 15 * time.Second},
			{name: "expiry in the past is immediate", err: backoffErr{now.Add(-time.Second)}, want: 0},
			{name: "expiry beyond resync is capped", err: backoffErr{now.Add(time.Hour)}, want: time.Minute},
		}
		for _, tc := range cases {
			for _, rr := range []float64{0, 0.5, 0.999} {
				r = rr
				want := tc.want + time.Duration(rr*0.5*float64(tc.want))
				if tc.transition {
					want = 0
				}
				if got := p.requeueDelay(tc.transition, tc.err); got != want {
					t.Errorf("%s (r=%v): %v, want %v", tc.name, rr, got, want)
				}
			}
		}
		// completeWork puts the pod on the queue with that delay.
		r = 0
		p.completeWork("1", false, backoffErr{now.Add(20 * time.Second)})
		if at, ok := p.WorkQueue().dueTime("1"); !ok || !at.Equal(now.Add(20*time.Second)) {
			t.Fatalf("due %v (%v), want %v", at, ok, now.Add(20*time.Second))
		}
	})
}

func TestRequeueAfterSyncs(t *testing.T) {
	withWorkers(t, Config{Rand: func() float64 { return 0.5 }}, func(t *testing.T, e *env) {
		q := e.p.WorkQueue()
		e.update(SyncPodCreate, newPod("1", "web"))
		if at, _ := q.dueTime("1"); time.Until(at) != 75*time.Second {
			t.Fatalf("after a sync due in %v, want 75s", time.Until(at))
		}
		e.syncer.setErr("1", errors.New("x"))
		e.update(SyncPodSync, newPod("1", "web"))
		if at, _ := q.dueTime("1"); time.Until(at) != 12500*time.Millisecond {
			t.Fatalf("after an error due in %v, want 12.5s", time.Until(at))
		}
		e.syncer.blockOn("terminated", "1")
		e.update(SyncPodKill, newPod("1", "web"))
		// The terminating → terminated transition requeued at once.
		if at, _ := q.dueTime("1"); !at.Equal(time.Now()) {
			t.Fatalf("after a transition due at %v, want now", at)
		}
		e.syncer.unblock("terminated", "1")
		synctest.Wait()
	})
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	withWorkers(t, Config{Registerer: reg}, func(t *testing.T, e *env) {
		e.update(SyncPodCreate, newPod("1", "web"))
		e.update(SyncPodKill, newPod("1", "web"))
	})
	n, err := testutil.GatherAndCount(reg, "kubelet_pod_worker_duration_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 { // create, terminating, terminated
		t.Fatalf("%d series, want 3", n)
	}
	// A second set of workers on the same registerer shares the histogram.
	if _, err := New(Config{Syncer: newFakeSyncer(), Cache: newFakeCache(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
}

func TestNewConfig(t *testing.T) {
	_, err := New(Config{ResyncInterval: -1, BackOffPeriod: -1})
	for _, field := range []string{"Syncer", "Cache", "ResyncInterval", "BackOffPeriod"} {
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !containsStr(err.Error(), field) {
			t.Fatalf("error %v does not name %s", err, field)
		}
	}
	p, err := New(Config{Syncer: newFakeSyncer(), Cache: newFakeCache()})
	if err != nil {
		t.Fatal(err)
	}
	if p.resync != time.Minute || p.backOff != 10*time.Second || p.WorkQueue() == nil {
		t.Fatalf("defaults not filled: %v %v", p.resync, p.backOff)
	}
	if SyncPodKill.String() != "kill" || SyncPodCreate.String() != "create" || SyncPodUpdate.String() != "update" || SyncPodSync.String() != "sync" || UpdateType(9).String() != "UpdateType(9)" {
		t.Fatal("UpdateType strings")
	}
	if TerminatingPod.String() != "terminating" || State(7).String() != "State(7)" {
		t.Fatal("State strings")
	}
}

func containsStr(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestRunLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, c := newFakeSyncer(), newFakeCache()
		p, err := New(Config{Syncer: s, Cache: c})
		if err != nil {
			t.Fatal(err)
		}
		// Updates before Run wait for it.
		p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("1", "web")})
		synctest.Wait()
		if len(s.all()) != 0 {
			t.Fatal("synced before Run")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		synctest.Wait()
		if got := fmt.Sprint(s.history("1")); got != "[1:sync(create)]" {
			t.Fatalf("history %s", got)
		}
		if err := p.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Fatalf("second Run: %v", err)
		}
		// Stopping cancels a sync in flight and waits for the worker.
		s.blockOn("sync", "2")
		p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("2", "db")})
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s.cancelled["2"] != 1 {
			t.Fatal("sync in flight not cancelled on stop")
		}
		p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("3", "x")})
		if err := p.updatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("3", "x")}); !errors.Is(err, ErrStopped) {
			t.Fatalf("update after stop: %v", err)
		}
		if err := p.Run(t.Context()); !errors.Is(err, ErrStopped) {
			t.Fatalf("Run after stop: %v", err)
		}
	})
}

func TestUpdatePodBadInput(t *testing.T) {
	withWorkers(t, Config{}, func(t *testing.T, e *env) {
		for _, opts := range []UpdatePodOptions{
			{UpdateType: SyncPodCreate},
			{UpdateType: SyncPodCreate, Pod: &v1.Pod{}},
			{UpdateType: SyncPodKill, RunningPod: &kubetypes.Pod{}},
			{UpdateType: SyncPodUpdate, RunningPod: &kubetypes.Pod{ID: "x"}},
		} {
			if err := e.p.updatePod(opts); !errors.Is(err, ErrInvalidUpdate) {
				t.Fatalf("%+v: %v", opts, err)
			}
			e.p.UpdatePod(opts) // must not panic
		}
		synctest.Wait()
		if len(e.syncer.all()) != 0 || e.workerCount() != 0 {
			t.Fatal("bad updates started work")
		}
		// The caller's kill options are not changed.
		k := &KillPodOptions{}
		e.p.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("1", "web"), KillPodOptions: k})
		synctest.Wait()
		if k.PodTerminationGracePeriodSecondsOverride != nil {
			t.Fatal("caller's KillPodOptions mutated")
		}
	})
}
