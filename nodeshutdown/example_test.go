package nodeshutdown_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/nodeshutdown"
)

// A shutdown kills the pods in the kubelet's groups; each gets its status.
func Example() {
	critical := int32(2000000000)
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: v1.PodSpec{Priority: &critical}},
	}
	m, err := nodeshutdown.New(nodeshutdown.Config{
		GracePeriod:             30 * time.Second,
		GracePeriodCriticalPods: 10 * time.Second,
		ActivePods:              func() []*v1.Pod { return pods },
		KillPod: func(_ context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) error {
			var s v1.PodStatus
			status(&s)
			fmt.Printf("kill %s with %ds: %s %s, %s\n", pod.Name, grace, s.Phase, s.Reason, s.Conditions[0].Type)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("groups:", m.Groups())
	if err := m.Shutdown(context.Background()); err != nil {
		fmt.Println(err)
	}
	ok, reason, _ := m.Admit(&v1.Pod{}, nil)
	fmt.Println("admit:", ok, reason, "ready:", m.ShutdownStatus())
	// Output:
	// groups: [{0 20} {2000000000 10}]
	// kill web with 20s: Failed Terminated, DisruptionTarget
	// kill dns with 10s: Failed Terminated, DisruptionTarget
	// admit: false NodeShutdown ready: node is shutting down
}
