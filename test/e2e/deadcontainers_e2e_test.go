//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/syncloop"
)

// TestCrashLoopKeepsNewestDeadInstance runs the Agent in process on
// containerd with container GC an hour away: a crash-looping container's
// older dead instances are removed at its next death (the dead container
// deletor), one dead instance stays, and the pod status's restart count is
// the newest instance's attempt in containerd, its exit code the crash's.
func TestCrashLoopKeepsNewestDeadInstance(t *testing.T) {
	e := volumeEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir, manifests := agentDirs(t)
	const crasher = "crash-loop"
	writeManifest(t, manifests, crasher, exitManifest(crasher, e.busybox, "Always", "exit 1"))
	pod := crasher + "-" + nodeName

	sink := &exitSink{first: map[string]exitSeen{}, latest: map[string]v1.PodStatus{}}
	agent, err := e.builder(dir, manifests).
		WithStatusSink(sink).
		WithSyncLoopConfig(func(c *syncloop.Config) { c.ContainerGCPeriod = time.Hour }).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	// Remove the pod's containers and sandbox once the agent has stopped:
	// the manifest is gone with the temp dir, and the next test must not
	// see them.
	t.Cleanup(func() { e.cleanup(t) })
	defer runAgent(t, agent, 30*time.Second)()

	instances := func() (exited int, newest *runtimeapi.Container, all string) {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer ccancel()
		cs, err := e.cri.ListContainers(cctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{kuberuntime.LabelPodName: pod}})
		if err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
		for _, c := range cs {
			if c.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
				exited++
			}
			if newest == nil || c.GetMetadata().GetAttempt() > newest.GetMetadata().GetAttempt() {
				newest = c
			}
			all += fmt.Sprintf(" %s/%d", c.GetState(), c.GetMetadata().GetAttempt())
		}
		return exited, newest, all
	}
	// Back-off 10s, then 20s: the third instance starts about 30s in.
	waitFor(t, 3*time.Minute, pod+" restarted twice", func() (bool, string) {
		st := sink.status(pod)
		if len(st.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("%+v", st)
		}
		_, _, all := instances()
		return st.ContainerStatuses[0].RestartCount >= 2, fmt.Sprintf("restarts %d, in containerd:%s", st.ContainerStatuses[0].RestartCount, all)
	})
	waitFor(t, 30*time.Second, "one dead instance in containerd, restart count its attempt", func() (bool, string) {
		exited, newest, all := instances()
		st := sink.status(pod)
		cs := st.ContainerStatuses[0]
		term := cs.State.Terminated
		if term == nil {
			term = cs.LastTerminationState.Terminated
		}
		ok := exited == 1 && newest != nil && int64(cs.RestartCount) == int64(newest.GetMetadata().GetAttempt()) &&
			term != nil && term.ExitCode == 1
		return ok, fmt.Sprintf("restarts %d, last exit %+v, in containerd:%s", cs.RestartCount, term, all)
	})
}
