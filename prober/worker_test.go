package prober

import (
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestInitialResults(t *testing.T) {
	for _, tc := range []struct {
		t    ProbeType
		want Result
	}{{Readiness, Failure}, {Liveness, Success}, {Startup, Unknown}} {
		e := newEnv(t)
		pod := testPod(tc.t, execProbe())
		w := e.workerFor(tc.t, pod)
		// Not yet started (startup) / started (the others), and within
		// the initial delay, so that only the initial value is set.
		w.spec.InitialDelaySeconds = 100
		e.status.setStatus(testUID, runningStatus(testCID, tc.t != Startup, start))
		if !w.doProbe(t.Context()) {
			t.Fatal("worker stopped")
		}
		if got, ok := e.m.Result(tc.t, testCID); !ok || got != tc.want {
			t.Errorf("%v: initial result %v (ok %v), want %v", tc.t, got, ok, tc.want)
		}
		if e.probe.count() != 0 {
			t.Errorf("%v: probed within the initial delay", tc.t)
		}
		if u := e.drain(); len(u) != 1 || u[0] != (Update{testUID, testCID, tc.t, tc.want}) {
			t.Errorf("%v: updates %+v", tc.t, u)
		}
	}
}

func TestFailureThreshold(t *testing.T) {
	e := newEnv(t)
	p := execProbe()
	p.SuccessThreshold, p.FailureThreshold = 1, 3
	w := e.workerFor(Readiness, testPod(Readiness, p))
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	ctx := t.Context()
	for i := range 2 {
		// Success, then failures: two failures keep Success.
		e.probe.setResult(Success)
		w.doProbe(ctx)
		if r := e.result(Readiness, testCID); r != Success {
			t.Fatalf("round %d: after a success %v", i, r)
		}
		e.probe.setResult(Failure)
		for j := range 2 {
			w.doProbe(ctx)
			if r := e.result(Readiness, testCID); r != Success {
				t.Fatalf("round %d: after %d failures %v, want Success", i, j+1, r)
			}
		}
		w.doProbe(ctx)
		if r := e.result(Readiness, testCID); r != Failure {
			t.Fatalf("round %d: after 3 failures %v, want Failure", i, r)
		}
	}
}

func TestSuccessThreshold(t *testing.T) {
	e := newEnv(t)
	p := execProbe()
	p.SuccessThreshold, p.FailureThreshold = 3, 1
	w := e.workerFor(Readiness, testPod(Readiness, p))
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	ctx := t.Context()
	for i := range 2 {
		e.probe.setResult(Success)
		for j := range 2 {
			w.doProbe(ctx)
			if r := e.result(Readiness, testCID); r != Failure {
				t.Fatalf("round %d: after %d successes %v, want Failure", i, j+1, r)
			}
		}
		w.doProbe(ctx)
		if r := e.result(Readiness, testCID); r != Success {
			t.Fatalf("round %d: after 3 successes %v", i, r)
		}
		e.probe.setResult(Failure)
		w.doProbe(ctx)
		if r := e.result(Readiness, testCID); r != Failure {
			t.Fatalf("round %d: one failure (threshold 1) gave %v", i, r)
		}
	}
}

func TestInitialDelay(t *testing.T) {
	for _, pt := range []ProbeType{Liveness, Readiness, Startup} {
		e := newEnv(t)
		p := execProbe()
		p.InitialDelaySeconds = 10
		w := e.workerFor(pt, testPod(pt, p))
		e.probe.setResult(Failure)
		if pt != Liveness {
			e.probe.setResult(Success)
		}
		e.status.setStatus(testUID, runningStatus(testCID, pt != Startup, e.clk.Now()))
		w.doProbe(t.Context())
		if e.probe.count() != 0 || e.result(pt, testCID) != w.initial {
			t.Fatalf("%v: probed within the delay (calls %d, result %v)", pt, e.probe.count(), e.result(pt, testCID))
		}
		e.clk.Step(9 * time.Second)
		w.doProbe(t.Context())
		if e.probe.count() != 0 {
			t.Fatalf("%v: probed after 9s of a 10s delay", pt)
		}
		e.clk.Step(time.Second)
		w.doProbe(t.Context())
		if e.probe.count() != 1 {
			t.Fatalf("%v: not probed after the delay", pt)
		}
		want := Success
		if pt == Liveness {
			want = Failure
			p := w.spec
			for range p.FailureThreshold - 1 {
				w.doProbe(t.Context())
			}
		}
		if r := e.result(pt, testCID); r != want {
			t.Errorf("%v: result %v after the delay, want %v", pt, r, want)
		}
	}
}

func TestOnHoldOnLivenessOrStartupCheckFailure(t *testing.T) {
	for _, pt := range []ProbeType{Liveness, Startup} {
		e := newEnv(t)
		p := execProbe()
		p.FailureThreshold = 1
		w := e.workerFor(pt, testPod(pt, p))
		e.status.setStatus(testUID, runningStatus(testCID, pt == Liveness, start))
		e.probe.setResult(Failure)
		w.doProbe(t.Context())
		if r := e.result(pt, testCID); r != Failure || !w.onHold {
			t.Fatalf("%v: result %v onHold %v", pt, r, w.onHold)
		}
		// On hold: a success changes nothing, no probe runs.
		e.probe.setResult(Success)
		calls := e.probe.count()
		w.doProbe(t.Context())
		if r := e.result(pt, testCID); r != Failure || e.probe.count() != calls {
			t.Fatalf("%v: on hold, result %v, %d new probes", pt, r, e.probe.count()-calls)
		}
		// A new instance: initial value, then probed again.
		e.status.setStatus(testUID, runningStatus("containerd://c2", pt == Liveness, start))
		w.doProbe(t.Context())
		if pt == Liveness && w.onHold {
			t.Fatalf("%v: still on hold after the container changed", pt)
		}
		if r := e.result(pt, "containerd://c2"); r != Success {
			t.Fatalf("%v: new instance result %v, want Success", pt, r)
		}
		if _, ok := e.m.Result(pt, testCID); ok {
			t.Errorf("%v: the old instance's result was kept", pt)
		}
		if pt == Startup && !w.onHold {
			t.Errorf("startup: a success must also put the worker on hold")
		}
	}
}

func TestLivenessAndReadinessWaitForStartup(t *testing.T) {
	for _, pt := range []ProbeType{Liveness, Readiness} {
		e := newEnv(t)
		w := e.workerFor(pt, testPod(pt, execProbe()))
		e.status.setStatus(testUID, runningStatus(testCID, false, start))
		w.doProbe(t.Context())
		if e.probe.count() != 0 {
			t.Errorf("%v ran before the container started", pt)
		}
	}
	// And the startup probe stops once started.
	e := newEnv(t)
	w := e.workerFor(Startup, testPod(Startup, execProbe()))
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	w.doProbe(t.Context())
	if e.probe.count() != 0 {
		t.Error("startup probe ran on a started container")
	}
}

func TestDeletingPodReportsSuccess(t *testing.T) {
	for _, pt := range []ProbeType{Liveness, Startup} {
		e := newEnv(t)
		pod := testPod(pt, execProbe())
		now := metav1.NewTime(start)
		pod.DeletionTimestamp = &now
		w := e.workerFor(pt, pod)
		e.probe.setResult(Failure)
		e.status.setStatus(testUID, runningStatus(testCID, pt == Liveness, start))
		if w.doProbe(t.Context()) {
			t.Errorf("%v: worker keeps going on a deleted pod", pt)
		}
		if r := e.result(pt, testCID); r != Success {
			t.Errorf("%v: %v, want Success", pt, r)
		}
	}
}

func TestNonRunningContainer(t *testing.T) {
	e := newEnv(t)
	pod := testPod(Readiness, execProbe())
	w := e.workerFor(Readiness, pod)
	st := runningStatus(testCID, true, start)
	st.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	e.status.setStatus(testUID, st)
	if !w.doProbe(t.Context()) {
		t.Error("restartPolicy Always: worker must keep going")
	}
	pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	if w.doProbe(t.Context()) {
		t.Error("OnFailure, exit 0: worker must stop")
	}
	if r := e.result(Readiness, testCID); r != Failure {
		t.Errorf("result %v", r)
	}
	// A terminal pod stops the worker; no status keeps it waiting.
	st.Phase = v1.PodSucceeded
	e.status.setStatus(testUID, st)
	if w.doProbe(t.Context()) {
		t.Error("terminal pod: worker must stop")
	}
	e2 := newEnv(t)
	if !e2.workerFor(Readiness, testPod(Readiness, execProbe())).doProbe(t.Context()) {
		t.Error("no status: worker must wait")
	}
}

func TestErroredProbeIsRetriedAndNotCounted(t *testing.T) {
	e := newEnv(t)
	p := execProbe()
	p.FailureThreshold = 1
	w := e.workerFor(Liveness, testPod(Liveness, p))
	e.status.setStatus(testUID, runningStatus(testCID, true, start))
	e.probe.mu.Lock()
	e.probe.r, e.probe.err = Unknown, errors.New("exec failed")
	e.probe.mu.Unlock()
	w.doProbe(t.Context())
	if n := e.probe.count(); n != maxRetries {
		t.Errorf("%d tries, want %d", n, maxRetries)
	}
	if r := e.result(Liveness, testCID); r != Success {
		t.Errorf("an errored probe changed the result to %v", r)
	}
}

func TestPanicKeepsWorkerAlive(t *testing.T) {
	e := newEnv(t)
	pod := testPod(Readiness, execProbe())
	w := e.workerFor(Readiness, pod)
	e.m.cfg.Status = panicStatus{}
	if !w.doProbe(t.Context()) {
		t.Error("a panic must not stop the worker")
	}
}

type panicStatus struct{}

func (panicStatus) GetPodStatus(_ types.UID) (v1.PodStatus, bool) { panic("boom") }
