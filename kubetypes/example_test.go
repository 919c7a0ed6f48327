package kubetypes_test

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

func Example() {
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
		kubetypes.ConfigSourceAnnotation: kubetypes.SourceFile,
	}}}
	fromAPI := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Annotations: map[string]string{
		kubetypes.ConfigSourceAnnotation: kubetypes.SourceAPI,
	}}}
	u := kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceFile, Pods: []*v1.Pod{static, fromAPI}}
	fmt.Println(u.Op, u.Source)
	for _, p := range u.Pods {
		fmt.Println(p.Name, "static:", kubetypes.IsStaticPod(p), "critical:", kubetypes.IsCriticalPod(p))
	}

	status := &kubetypes.PodStatus{ID: "uid-1", ContainerStatuses: []*kubetypes.ContainerStatus{
		{ID: "c2", Name: "app", State: kubetypes.ContainerStateRunning, RestartCount: 1},
		{ID: "c1", Name: "app", State: kubetypes.ContainerStateExited},
	}}
	fmt.Println("newest app:", status.FindContainerStatusByName("app").ID)
	fmt.Println("running containers:", len(status.RunningPod().Containers))
	// Output:
	// SET file
	// web static: true critical: true
	// db static: false critical: false
	// newest app: c2
	// running containers: 1
}
