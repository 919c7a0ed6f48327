package runtimetest_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/runtimetest"
)

// An Endpoint for the fake runtime, as a Factory returns it for each test
// (runtimetest.RunScenarios(t, factory)): the images it names must be
// present in the runtime, and MissingImage absent. Checking them is the
// first thing to do when wiring a new implementation.
func ExampleEndpoint() {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{
		Clock:         fc,
		Images:        []string{"localhost/pause:1", "localhost/busybox:1"},
		Missing:       []string{"localhost/missing:1"},
		RequireImages: true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	e := &runtimetest.Endpoint{
		Runtime: rt, Images: rt, Clock: fc, Step: fc.Step,
		PauseImage: "localhost/pause:1", BusyboxImage: "localhost/busybox:1",
		MissingImage: "localhost/missing:1",
	}
	ctx := context.Background()
	for _, image := range []string{e.PauseImage, e.BusyboxImage, e.MissingImage} {
		st, err := e.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
		if err != nil {
			fmt.Println(image, err)
			continue
		}
		fmt.Printf("%s present: %v\n", image, st.GetImage() != nil)
	}
	// Output:
	// localhost/pause:1 present: true
	// localhost/busybox:1 present: true
	// localhost/missing:1 present: false
}

// RunPod puts a pod on the fake runtime as the agent would, so a PLEG, a
// prober or a status manager can be tested against it alone.
func ExampleRunPod() {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: fc})
	if err != nil {
		fmt.Println(err)
		return
	}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup", Image: "busybox", Command: []string{"true"}}},
			Containers:     []v1.Container{{Name: "app", Image: "busybox", Command: []string{"sleep", "3600"}}},
		},
	}
	st, err := runtimetest.RunPod(context.Background(), rt, pod, runtimetest.RunPodOptions{Clock: fc})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sandbox:", st.SandboxStatuses[0].GetState(), st.SandboxStatuses[0].GetLabels()["io.kubernetes.pod.uid"])
	state := map[string]string{}
	for _, cs := range st.ContainerStatuses {
		state[cs.Name] = string(cs.State)
	}
	fmt.Println("setup:", state["setup"], "app:", state["app"])
	// Output:
	// sandbox: SANDBOX_READY uid-1
	// setup: exited app: running
}
