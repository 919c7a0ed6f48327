package fake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// A container's simulated process follows the injected clock: busybox
// commands mean what they mean on a real runtime.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}})
	if err != nil {
		panic(err)
	}
	sb, _ := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "1"},
	}, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "job"},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Command:  []string{"sh", "-c", "sleep 2; exit 3"},
	}, nil)
	_ = rt.StartContainer(ctx, id)

	st, _ := rt.ContainerStatus(ctx, id, false)
	fmt.Println(st.Status.State)
	clk.Step(2 * time.Second)
	st, _ = rt.ContainerStatus(ctx, id, false)
	fmt.Println(st.Status.State, st.Status.ExitCode, st.Status.Reason)

	pod, _ := rt.PodSandboxStatus(ctx, sb, false)
	fmt.Println(pod.Status.Network.Ip)
	// Output:
	// CONTAINER_RUNNING
	// CONTAINER_EXITED 3 Error
	// 10.88.0.2
}

// Faults are injected per CRI method; calls are recorded.
func ExampleRuntime_InjectError() {
	ctx := context.Background()
	rt, _ := fake.New(fake.Config{})
	rt.InjectError("PullImage", errors.New("registry unavailable"), 1)
	_, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx"}, nil, nil)
	fmt.Println(err)
	ref, err := rt.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx"}, nil, nil)
	fmt.Println(ref[:7], err, rt.CountCalls("PullImage"))
	// Output:
	// registry unavailable
	// sha256: <nil> 2
}

// ExecSync reports a non-zero exit code as *fake.ExitError.
func ExampleExitError() {
	ctx := context.Background()
	rt, _ := fake.New(fake.Config{})
	sb, _ := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}}, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
	}, nil)
	_ = rt.StartContainer(ctx, id)
	rt.SetExecHandler(func(_ string, cmd []string) ([]byte, []byte, int32, error) {
		return []byte("not ready\n"), nil, 1, nil
	})
	out, _, err := rt.ExecSync(ctx, id, []string{"cat", "/tmp/ready"}, time.Second)
	var exit *fake.ExitError
	fmt.Printf("%q %v %v\n", out, errors.As(err, &exit), exit.ExitStatus())
	// Output:
	// "not ready\n" true 1
}
