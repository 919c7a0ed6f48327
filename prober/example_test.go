package prober_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/prober"
)

// statuses is a prober.StatusGetter with one running container.
type statuses struct{ st v1.PodStatus }

func (s statuses) GetPodStatus(types.UID) (v1.PodStatus, bool) { return s.st, true }

// execSync fails "cat /tmp/healthy" the way a container without the file
// does.
type execSync struct{}

func (execSync) ExecSync(_ context.Context, _ string, cmd []string, _ time.Duration) ([]byte, []byte, error) {
	return nil, []byte("cat: can't open '/tmp/healthy'"), &fake.ExitError{Code: 1}
}

// Example: a liveness probe fails twice (failureThreshold 2); the second
// failure changes the result, which the runtime then acts on.
func Example() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	started := true
	st := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "app", ContainerID: "containerd://abc", Started: &started,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}},
	}}}
	m, err := prober.New(prober.Config{Status: statuses{st}, Exec: execSync{}, Clock: clk,
		Jitter: func(time.Duration) time.Duration { return 0 }})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	m.AddPod(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid1", Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", LivenessProbe: &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 5, FailureThreshold: 2,
		}}}},
	})
	u := <-m.Updates() // the new instance starts as Success
	fmt.Println(u.Type, u.ContainerID, u.Result)
	// The worker's ticker exists before its first update; the first probe
	// fails once (below the threshold), the tick of the next period fails
	// again.
	clk.Step(5 * time.Second)
	u = <-m.Updates()
	fmt.Println(u.Type, u.ContainerID, u.Result)
	fmt.Println("runtime sees:", m.RuntimeResults().Liveness("abc"))
	cancel()
	<-done
	// Output:
	// Liveness containerd://abc Success
	// Liveness containerd://abc Failure
	// runtime sees: Failure
}
