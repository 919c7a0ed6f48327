package containerdwire_test

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// onePodSource sends one SET with its pods, then waits.
type onePodSource struct {
	out  chan<- kubetypes.PodUpdate
	pods []*v1.Pod
}

func (s *onePodSource) Run(ctx context.Context) error {
	select {
	case s.out <- kubetypes.PodUpdate{Pods: s.pods, Op: kubetypes.SET, Source: "test"}:
	case <-ctx.Done():
		return nil
	}
	<-ctx.Done()
	return nil
}

// evPod is one host-network pod that must not be restarted.
func evPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-web"),
			Annotations: map[string]string{"kubernetes.io/config.source": "test"}},
		Spec: v1.PodSpec{
			HostNetwork: true, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "main", Image: "busybox:1"}},
		},
	}
}
