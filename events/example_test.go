package events_test

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubetypes"
)

func Example() {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fake, _ := events.NewFake(events.FakeConfig{Clock: clk})
	warnings, _ := events.NewLastWarnings(events.LastWarningsConfig{Clock: clk})
	rec := events.NewMulti(fake, warnings)

	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "nginx", Image: "nginx"}}}}
	rec.Eventf(kubetypes.ContainerRef(pod, "nginx"), v1.EventTypeNormal, kubetypes.ReasonPulling, "Pulling image %q", "nginx")
	rec.Eventf(kubetypes.ContainerRef(pod, "nginx"), v1.EventTypeWarning, kubetypes.ReasonFailed, "Failed to pull image %q: %v", "nginx", "not found")
	rec.Event(kubetypes.NodeRef("node-1"), v1.EventTypeNormal, kubetypes.ReasonStarting, "Starting kubelet.")

	fmt.Print(fake)
	w, _ := warnings.Last("u1")
	fmt.Println("last warning of web:", w.Reason, w.Message)
	// Output:
	// Normal Pulling Pod/default/web[spec.containers{nginx}]: Pulling image "nginx"
	// Warning Failed Pod/default/web[spec.containers{nginx}]: Failed to pull image "nginx": not found
	// Normal Starting Node/node-1: Starting kubelet.
	// last warning of web: Failed Failed to pull image "nginx": not found
}
