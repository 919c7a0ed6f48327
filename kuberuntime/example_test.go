package kuberuntime_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// nullCRI is a runtime that holds nothing; enough to compute actions.
type nullCRI struct{ kuberuntime.RuntimeService }

func (nullCRI) ImageStatus(context.Context, *runtimeapi.ImageSpec, bool) (*runtimeapi.ImageStatusResponse, error) {
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (nullCRI) PullImage(context.Context, *runtimeapi.ImageSpec, *runtimeapi.AuthConfig, *runtimeapi.PodSandboxConfig) (string, error) {
	return "", nil
}

func ExampleManager_ComputePodActions() {
	m, err := kuberuntime.New(kuberuntime.Config{Runtime: nullCRI{}, Images: nullCRI{}})
	if err != nil {
		panic(err)
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "1234", Name: "web", Namespace: "default"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "migrate", Image: "app:1"}},
			Containers:     []v1.Container{{Name: "web", Image: "app:1"}},
		},
	}
	// Nothing exists yet: a sandbox, then the first init container.
	a := m.ComputePodActions(pod, nil)
	fmt.Println(a.CreateSandbox, a.InitContainersToStart, a.ContainersToStart)

	// The sandbox is up and the init container succeeded: start the app.
	status := &kubetypes.PodStatus{
		ID: pod.UID,
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
			Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{},
			Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.7"},
		}},
		ContainerStatuses: []*kubetypes.ContainerStatus{{
			ID: "c1", Name: "migrate", State: kubetypes.ContainerStateExited, ExitCode: 0,
			FinishedAt: time.Unix(0, 0), Hash: kuberuntime.HashContainer(&pod.Spec.InitContainers[0]),
		}},
	}
	a = m.ComputePodActions(pod, status)
	fmt.Println(a.CreateSandbox, a.SandboxID, a.InitContainersToStart, a.ContainersToStart)
	// Output:
	// true [0] []
	// false sb1 [] [0]
}
