package podstatus_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
)

// Generate the API status of a pod whose init container has completed and
// whose app container runs, then deliver it through a Manager to an
// in-memory sink.
func ExampleGenerate() {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup", Image: "busybox"}},
			Containers:     []v1.Container{{Name: "app", Image: "busybox"}},
		},
	}
	rs := &kubetypes.PodStatus{
		ID:  pod.UID,
		IPs: []string{"10.0.0.7"},
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
			Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: now.Add(-time.Minute).UnixNano(),
			Metadata: &runtimeapi.PodSandboxMetadata{}, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7"},
		}},
		ContainerStatuses: []*kubetypes.ContainerStatus{
			{ID: "c2", Name: "app", State: kubetypes.ContainerStateRunning, CreatedAt: now.Add(-30 * time.Second), StartedAt: now.Add(-29 * time.Second)},
			{ID: "c1", Name: "setup", State: kubetypes.ContainerStateExited, ExitCode: 0, Reason: "Completed", CreatedAt: now.Add(-50 * time.Second)},
		},
	}

	status := podstatus.Generate(pod, rs, v1.PodStatus{}, nil, nil, now)
	fmt.Println("phase:", status.Phase, "ip:", status.PodIP, "qos:", status.QOSClass)
	for _, c := range status.Conditions {
		fmt.Printf("%s=%s\n", c.Type, c.Status)
	}
	app := status.ContainerStatuses[0]
	fmt.Println(app.Name, app.ContainerID, "ready:", app.Ready)

	sink := podstatus.NewMemorySink()
	m, err := podstatus.New(podstatus.Config{Sink: sink, Clock: clocktesting.NewFakeClock(now)})
	if err != nil {
		fmt.Println(err)
		return
	}
	m.SetPodStatus(pod, status)
	if err := m.SyncOnce(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	got, _ := sink.Get(pod.UID)
	fmt.Println("delivered:", got.Phase, "updates:", sink.Updates())
	// Output:
	// phase: Running ip: 10.0.0.7 qos: BestEffort
	// PodReadyToStartContainers=True
	// Initialized=True
	// Ready=True
	// ContainersReady=True
	// PodScheduled=True
	// app containerd://c2 ready: true
	// delivered: Running updates: 1
}
