package nodekittest_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/nodekittest"
)

// Every test here runs a whole agent on the fake runtime inside a
// testing/synctest bubble and asserts exact virtual times. They are run
// 1,000 times under -race before a change to the agent lands:
//
//	go test -race -count=1000 ./nodekittest/

func pod(name string, cmd ...string) *v1.Pod {
	grace := int64(1)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name + "-uid")},
		Spec: v1.PodSpec{
			HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "main", Image: "busybox:1", Command: cmd}},
		},
	}
}

func builderT(t *testing.T) *nodekit.Builder {
	return nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1")
}

func seconds(ds ...float64) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = time.Duration(d * float64(time.Second))
	}
	return out
}

// A pod that arrives at 0 runs at 0: its container starts, and its status
// says Running, in the instant it arrives.
func TestStartAtZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := nodekittest.Start(t, builderT(t))
		h.SetPods(pod("web", "sleep", "infinity"))
		at := h.WaitFor("web Running", time.Minute, func() bool { return h.Status("web").Phase == v1.PodRunning })
		if at != 0 {
			t.Errorf("Running at %v, want 0", at)
		}
		if got := h.Starts("web", "main"); !slices.Equal(got, seconds(0)) {
			t.Errorf("starts %v, want [0s]", got)
		}
		h.Advance(3 * time.Minute) // resyncs change nothing
		if got := h.Starts("web", "main"); !slices.Equal(got, seconds(0)) {
			t.Errorf("starts after 3m %v, want [0s]", got)
		}
	})
}

// A container that exits at once restarts at 0, 1, 12, 33, 74 and 155 s
// (nodekittest.CrashLoopStarts says why), with CrashLoopBackOff reported
// in between. (The back-off status itself comes at the exit's instant or
// one relist later: the relist and the retry fall on the same instants.)
func TestCrashLoopBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := nodekittest.Start(t, builderT(t))
		h.SetPods(pod("crash", "sh", "-c", "exit 1"))
		h.WaitFor("6 starts", 10*time.Minute, func() bool { return len(h.Starts("crash", "main")) >= 6 })
		got := h.Starts("crash", "main")
		if want := seconds(0, 1, 12, 33, 74, 155); !slices.Equal(got, want) {
			t.Fatalf("starts %v, want %v", got, want)
		}
		if want := nodekittest.CrashLoopStarts(6); !slices.Equal(got, want) {
			t.Fatalf("starts %v, CrashLoopStarts says %v", got, want)
		}
		backoff := false
		for _, r := range h.History("crash") {
			if r.At >= 12*time.Second && r.At < 33*time.Second && len(r.Status.ContainerStatuses) == 1 {
				if w := r.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
					backoff = true
				}
			}
		}
		if !backoff {
			for _, r := range h.History("crash") {
				if len(r.Status.ContainerStatuses) == 1 {
					t.Logf("%v %s %+v", r.At, r.Status.Phase, r.Status.ContainerStatuses[0].State)
				}
			}
			t.Error("no CrashLoopBackOff status between 12s and 33s")
		}
	})
}

// A CreateContainer that fails at 0 is retried at 1 s: the relist at 1 s
// sees the pod's new sandbox, and its event syncs the pod (well before the
// pod worker's 10 s retry). The status at 0 says CreateContainerError.
func TestFailedCreateRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := nodekittest.Start(t, builderT(t))
		h.Runtime().InjectError("CreateContainer", errors.New("disk full"), 1)
		h.SetPods(pod("web", "sleep", "infinity"))
		at := h.WaitFor("web Running", time.Minute, func() bool { return h.Status("web").Phase == v1.PodRunning })
		if at != time.Second {
			t.Errorf("Running at %v, want 1s", at)
		}
		if got := h.Starts("web", "main"); !slices.Equal(got, seconds(1)) {
			t.Errorf("starts %v, want [1s]", got)
		}
		sawError := false
		for _, r := range h.History("web") {
			if r.At == 0 && len(r.Status.ContainerStatuses) == 1 {
				if w := r.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CreateContainerError" {
					sawError = true
				}
			}
		}
		if !sawError {
			t.Errorf("no CreateContainerError status at 0: %+v", h.History("web"))
		}
	})
}

// A liveness probe every 5 s that fails 3 times restarts the container at
// 10 s and 25 s: the probe worker starts once the sync that started the
// container recorded its status, so the first instance is probed at 0, 5
// and 10 s; the worker keeps its ticks, so the second instance (started at
// 10 s) is probed from 15 s on, and restarted at 25 s.
func TestLivenessRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := nodekittest.Start(t, builderT(t).WithProber())
		h.Runtime().SetExecHandler(func(string, []string) ([]byte, []byte, int32, error) { return nil, []byte("unhealthy"), 1, nil })
		p := pod("live", "sleep", "infinity")
		p.Spec.Containers[0].LivenessProbe = &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check"}}},
			PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
		}
		h.SetPods(p)
		h.WaitFor("3 starts", 10*time.Minute, func() bool { return len(h.Starts("live", "main")) >= 3 })
		if got, want := h.Starts("live", "main"), seconds(0, 10, 25); !slices.Equal(got, want) {
			t.Fatalf("starts %v, want %v", got, want)
		}
		var stops []nodekittest.ContainerEvent
		for _, e := range h.Events() {
			if !e.Started && e.Pod == "live" {
				stops = append(stops, e)
			}
		}
		if len(stops) != 2 || stops[0].At != 10*time.Second || stops[0].ExitCode != 143 {
			t.Errorf("stops %+v, want the first at 10s with 143 (sleep killed by SIGTERM)", stops)
		}
	})
}

// Memory pressure that appears at 25 s evicts the pod at the eviction
// manager's next cycle, 30 s (cycles every 10 s from the start).
func TestEviction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stats := eviction.NewFakeStats(&eviction.Summary{Memory: &eviction.MemoryStats{AvailableBytes: 1 << 30, WorkingSetBytes: 1 << 20}})
		hard, err := eviction.ParseThresholds(map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := nodekittest.Start(t, builderT(t).WithEviction(eviction.Config{Thresholds: hard, Stats: stats}))
		h.SetPods(pod("hog", "sleep", "infinity"))
		h.Advance(25 * time.Second)
		if ph := h.Status("hog").Phase; ph != v1.PodRunning {
			t.Fatalf("phase at 25s %q, want Running", ph)
		}
		stats.Set(&eviction.Summary{Memory: &eviction.MemoryStats{AvailableBytes: 10 << 20, WorkingSetBytes: 1 << 30},
			Pods: []eviction.PodStats{{UID: "hog-uid", MemoryWorkingSetBytes: 1 << 30}}})
		at := h.WaitFor("hog evicted", 5*time.Minute, func() bool { return h.Status("hog").Phase == v1.PodFailed })
		if at != 30*time.Second {
			for _, r := range h.History("hog") {
				cs := ""
				if len(r.Status.ContainerStatuses) > 0 {
					cs = fmt.Sprintf("%+v", r.Status.ContainerStatuses[0].State)
				}
				t.Logf("%v %s %s %s", r.At, r.Status.Phase, r.Status.Reason, cs)
			}
			t.Errorf("evicted at %v, want 30s", at)
		}
		if st := h.Status("hog"); st.Reason != eviction.Reason {
			t.Errorf("reason %q, want %q", st.Reason, eviction.Reason)
		}
		if got := h.Starts("hog", "main"); !slices.Equal(got, seconds(0)) {
			t.Errorf("starts %v, want [0s]: an evicted pod is not restarted", got)
		}
	})
}
