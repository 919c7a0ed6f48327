package nodekit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/prober"
)

// onePodSource sends one SET with its pods, then waits.
type onePodSource struct {
	out  chan<- kubetypes.PodUpdate
	pods []*v1.Pod
}

func (s *onePodSource) Run(ctx context.Context) error {
	select {
	case s.out <- kubetypes.PodUpdate{Pods: s.pods, Op: kubetypes.SET, Source: "test"}:
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

// statusSink keeps the latest status by pod name.
type statusSink struct {
	mu sync.Mutex
	st map[string]v1.PodStatus
}

func (s *statusSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st[pod.Name] = *st.DeepCopy()
	return nil
}

func (s *statusSink) get(name string) v1.PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st[name]
}

func podCondition(st v1.PodStatus, t v1.PodConditionType) v1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// TestProberOnFakeRuntime runs the whole agent with WithProber on the fake
// runtime, its exec probes scripted through the ExecHandler: the readiness
// probe makes the pod Ready, and a failing liveness probe has the container
// killed and restarted (restart count 1, a new container ID) and the new
// instance probed again.
func TestProberOnFakeRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var liveFails, readyFails atomic.Bool
		readyFails.Store(true)
		probe := func(cmd string, p int32) *v1.Probe {
			return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{cmd}}},
				PeriodSeconds: p, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 2}
		}
		grace := int64(1)
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-web"),
				Annotations: map[string]string{"kubernetes.io/config.source": "test"}},
			Spec: v1.PodSpec{
				HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
				Containers: []v1.Container{{
					Name: "main", Image: "busybox:1", Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
					LivenessProbe: probe("live", 1), ReadinessProbe: probe("ready", 1),
				}},
			},
		}
		sink := &statusSink{st: map[string]v1.PodStatus{}}
		agent, err := nodekit.NewBuilder().
			WithNodeName("node1").
			WithFakeRuntime("busybox:1").
			WithRootDir(t.TempDir()).
			WithStatusSink(sink).
			WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &onePodSource{out: out, pods: []*v1.Pod{pod}}, nil
			}).
			WithProber(func(c *prober.Config) { c.Jitter = func(time.Duration) time.Duration { return 0 } }).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if agent.Prober() == nil {
			t.Fatal("Agent.Prober() is nil after WithProber")
		}
		var execs atomic.Int64
		agent.FakeRuntime().SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32, error) {
			execs.Add(1)
			fail := (cmd[0] == "live" && liveFails.Load()) || (cmd[0] == "ready" && readyFails.Load())
			if fail {
				return nil, []byte("unhealthy"), 1, nil
			}
			return []byte("ok"), nil, 0, nil
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()

		waitFor := func(what string, limit time.Duration, cond func(v1.PodStatus) bool) v1.PodStatus {
			t.Helper()
			for waited := time.Duration(0); ; waited += 100 * time.Millisecond {
				synctest.Wait()
				if st := sink.get("web"); cond(st) {
					return st
				}
				if waited > limit {
					t.Fatalf("%s: not within %v: %+v", what, limit, sink.get("web"))
				}
				<-time.After(100 * time.Millisecond)
			}
		}
		main := func(st v1.PodStatus) v1.ContainerStatus {
			if len(st.ContainerStatuses) == 0 {
				return v1.ContainerStatus{}
			}
			return st.ContainerStatuses[0]
		}
		st := waitFor("Running, not ready", 10*time.Second, func(st v1.PodStatus) bool {
			return st.Phase == v1.PodRunning && main(st).State.Running != nil
		})
		first := main(st).ContainerID
		if main(st).Ready || podCondition(st, v1.PodReady) == v1.ConditionTrue {
			t.Fatalf("ready before the readiness probe passed: %+v", st)
		}
		readyFails.Store(false)
		st = waitFor("Ready", 5*time.Second, func(st v1.PodStatus) bool {
			return main(st).Ready && podCondition(st, v1.PodReady) == v1.ConditionTrue &&
				podCondition(st, v1.ContainersReady) == v1.ConditionTrue
		})
		if main(st).Started == nil || !*main(st).Started {
			t.Errorf("started not set: %+v", main(st))
		}
		// Liveness starts failing: after 2 failures the container is
		// killed and restarted.
		liveFails.Store(true)
		st = waitFor("restarted", 20*time.Second, func(st v1.PodStatus) bool {
			c := main(st)
			return c.RestartCount == 1 && c.ContainerID != first && c.State.Running != nil
		})
		if term := main(st).LastTerminationState.Terminated; term == nil {
			t.Errorf("no last termination state: %+v", main(st))
		}
		liveFails.Store(false)
		// A new container starts not ready (readiness starts at Failure), so
		// Ready for the new ID means its readiness probe ran and passed.
		second := main(st).ContainerID
		st = waitFor("new instance probed and Ready", 10*time.Second, func(st v1.PodStatus) bool {
			return main(st).Ready && podCondition(st, v1.PodReady) == v1.ConditionTrue
		})
		if main(st).ContainerID != second || main(st).RestartCount != 1 {
			t.Errorf("after recovery: container %s restart count %d, want %s with 1", main(st).ContainerID, main(st).RestartCount, second)
		}
		if execs.Load() == 0 {
			t.Error("no probe ever ran")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
