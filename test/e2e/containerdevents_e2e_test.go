//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/containerdwire"
	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
)

// exitSink remembers, per pod, the first terminated state reported for
// each container instance and when the agent reported it, and the latest
// status.
type exitSink struct {
	mu     sync.Mutex
	first  map[string]exitSeen // by container ID
	latest map[string]v1.PodStatus
}

type exitSeen struct {
	pod  string
	at   time.Time
	term v1.ContainerStateTerminated
}

func (s *exitSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest[pod.Name] = *st.DeepCopy()
	for _, cs := range st.ContainerStatuses {
		for _, term := range []*v1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if term == nil || term.ContainerID == "" {
				continue
			}
			if _, ok := s.first[term.ContainerID]; !ok {
				s.first[term.ContainerID] = exitSeen{pod: pod.Name, at: now, term: *term.DeepCopy()}
			}
		}
	}
	return nil
}

// exits returns the first reported exits of the pod's containers.
func (s *exitSink) exits(pod string) []exitSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []exitSeen
	for _, x := range s.first {
		if x.pod == pod {
			out = append(out, x)
		}
	}
	return out
}

func (s *exitSink) status(pod string) v1.PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest[pod]
}

func exitManifest(name, image, restartPolicy, command string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, name, restartPolicy, image, command)
}

// TestContainerdEventsExitWithoutRelist runs the Agent in process on
// containerd with containerdwire.Events and a 30s relist period: a
// container's exit still reaches its pod status within seconds (from
// containerd's /tasks/exit event: containerd 1.6's CRI has no container
// events), and a restartPolicy Always pod restarts as it should afterwards.
func TestContainerdEventsExitWithoutRelist(t *testing.T) {
	if os.Getenv("NODEKIT_CRI_ENDPOINT") == "" {
		t.Skip("NODEKIT_CRI_ENDPOINT is not set (start containerd with hack/containerd.sh)")
	}
	e := volumeEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { e.cleanup(t) })
	dir, manifests := agentDirs(t)
	const (
		once    = "exit-once"
		restart = "exit-restart"
	)
	// The containers exit on their own 4s after they start (the Always one
	// again after each restart).
	writeManifest(t, manifests, once, exitManifest(once, e.busybox, "Never", "sleep 4; exit 3"))
	writeManifest(t, manifests, restart, exitManifest(restart, e.busybox, "Always", "sleep 4; exit 0"))
	onceName, restartName := once+"-"+nodeName, restart+"-"+nodeName

	sink := &exitSink{first: map[string]exitSeen{}, latest: map[string]v1.PodStatus{}}
	var watcher *containerdevents.Watcher
	agent, err := containerdwire.Events(e.builder(dir, manifests), "", &watcher).
		WithStatusSink(sink).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	const relist = 30 * time.Second
	agent.PLEG().SetRelistPeriod(relist, 3*relist)
	defer runAgent(t, agent, 30*time.Second)()

	// Both exits show within a few seconds of finishedAt: far sooner than
	// a 30s relist could (the pods started after the first relist).
	for _, pod := range []string{onceName, restartName} {
		waitFor(t, 60*time.Second, pod+" exit reported", func() (bool, string) {
			x := sink.exits(pod)
			return len(x) > 0, fmt.Sprintf("status %+v", sink.status(pod))
		})
		x := sink.exits(pod)[0]
		lag := x.at.Sub(x.term.FinishedAt.Time)
		t.Logf("%s: finishedAt %s, reported %v later (exit %d, %s)", pod, x.term.FinishedAt.Format(time.RFC3339), lag, x.term.ExitCode, x.term.Reason)
		// FinishedAt has one-second resolution in the API: allow for it.
		if lag > 5*time.Second {
			t.Errorf("%s: exit reported %v after finishedAt; with a %v relist only events explain < 5s", pod, lag, relist)
		}
		wantCode, wantReason := int32(3), "Error"
		if pod == restartName {
			wantCode, wantReason = 0, "Completed"
		}
		if x.term.ExitCode != wantCode || x.term.Reason != wantReason {
			t.Errorf("%s: exit %d %q, want %d %q", pod, x.term.ExitCode, x.term.Reason, wantCode, wantReason)
		}
	}
	if watcher.Stats().Delivered == 0 {
		t.Error("the watcher delivered no event")
	}

	// The Always pod runs again, restarted once or more, with one running
	// container in containerd. The Never pod ends Failed; that takes up to
	// a relist: its terminating pod worker waits for a runtime status newer
	// than its last sync, as the kubelet's does.

	took := waitFor(t, 60*time.Second, restartName+" restarted and running", func() (bool, string) {
		st := sink.status(restartName)
		if len(st.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("%+v", st)
		}
		cs := st.ContainerStatuses[0]
		running := e.running(t)[restartName]
		return cs.RestartCount >= 1 && cs.State.Running != nil && running != nil && "containerd://"+running.Id == cs.ContainerID,
			fmt.Sprintf("restarts %d state %+v, running in containerd %v", cs.RestartCount, cs.State, running)
	})
	t.Logf("%s running again after a restart (%v after the exits were checked)", restartName, took)
	waitFor(t, relist+30*time.Second, onceName+" Failed", func() (bool, string) {
		st := sink.status(onceName)
		return st.Phase == v1.PodFailed, fmt.Sprintf("phase %s", st.Phase)
	})
}
