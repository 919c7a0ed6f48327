package apiserver_test

import (
	"context"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig/apiserver"
)

func Example() {
	client := fake.NewClientset(&v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       v1.PodSpec{NodeName: "node-1"},
	})
	out := make(chan kubetypes.PodUpdate)
	src, err := apiserver.New(apiserver.Config{Client: client, NodeName: "node-1", Out: out})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- src.Run(ctx) }()

	u := <-out
	fmt.Println(u.Op, u.Source, len(u.Pods), u.Pods[0].Name)

	// A pod bound to the node later: the full set is sent again.
	if _, err := client.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec:       v1.PodSpec{NodeName: "node-1"},
	}, metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	u = <-out
	fmt.Println(u.Op, len(u.Pods), u.Pods[0].Name, u.Pods[1].Name)

	cancel()
	fmt.Println(<-done)
	// Output:
	// SET api 1 web
	// SET 2 db web
	// <nil>
}

// ExampleShared: one watch of every node's pods, one source per node.
func ExampleShared() {
	client := fake.NewClientset(
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: v1.PodSpec{NodeName: "node-1"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db"}, Spec: v1.PodSpec{NodeName: "node-2"}},
	)
	shared, err := apiserver.NewShared(apiserver.SharedConfig{Client: client})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = shared.Run(ctx) })
	for _, node := range []string{"node-1", "node-2"} {
		out := make(chan kubetypes.PodUpdate)
		src, err := shared.Source(node, out)
		if err != nil {
			panic(err)
		}
		wg.Go(func() { _ = src.Run(ctx) })
		u := <-out
		fmt.Println(node, u.Op, u.Source, len(u.Pods), u.Pods[0].Name)
	}
	cancel()
	wg.Wait()
	// Output:
	// node-1 SET api 1 web
	// node-2 SET api 1 db
}
