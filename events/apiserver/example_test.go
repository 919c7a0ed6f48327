package apiserver_test

import (
	"context"
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/events/apiserver"
	"github.com/nodekit/nodekit/kubetypes"
)

func Example() {
	{
		client := fake.NewClientset()
		rec, err := apiserver.New(apiserver.Config{Client: client, NodeName: "node-1"})
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- rec.Run(ctx) }()

		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
		for range 3 {
			rec.Event(kubetypes.ContainerRef(pod, "app"), v1.EventTypeWarning, kubetypes.ReasonBackOff,
				"Back-off restarting failed container app in pod web_default(u1)")
		}
		for rec.Sent() < 3 { // the example waits for the three writes
			runtime.Gosched()
		}
		cancel()
		<-done

		list, _ := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
		for _, e := range list.Items {
			fmt.Println(e.Type, e.Reason, e.InvolvedObject.FieldPath, "count", e.Count, "from", e.Source.Component, e.Source.Host)
		}
		fmt.Println("sent", rec.Sent())
	}
	// Output:
	// Warning BackOff spec.containers{app} count 3 from kubelet node-1
	// sent 3
}
