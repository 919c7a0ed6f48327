package apiserver_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus/apiserver"
)

// A static pod gets a mirror pod in the API server, and its status is
// reported on that mirror.
func ExamplePodStatusSink() {
	ctx := context.Background()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "node-uid"}})
	static := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "etcd", Namespace: "kube-system", UID: "static-uid",
		Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceFile, kubetypes.ConfigHashAnnotation: "abc"}}}

	mirrors, _ := apiserver.NewMirrorClient(apiserver.MirrorClientConfig{Client: client, NodeName: "node-1"})
	sink, _ := apiserver.NewPodStatusSink(apiserver.PodStatusSinkConfig{Client: client})
	if err := mirrors.SyncMirrorPods(ctx, []*v1.Pod{static}); err != nil {
		fmt.Println(err)
	}
	if err := sink.SyncPodStatus(ctx, static, v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		fmt.Println(err)
	}
	mirror, _ := client.CoreV1().Pods("kube-system").Get(ctx, "etcd", metav1.GetOptions{})
	fmt.Println(mirror.Annotations[kubetypes.ConfigMirrorAnnotation], mirror.OwnerReferences[0].Kind, mirror.Status.Phase)
	// Output: abc Node Running
}
