package checkpoint_test

import (
	"context"
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig/checkpoint"
)

func Example() {
	dir, err := os.MkdirTemp("", "persisted-pods")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// First boot: the source delivers a set; it is persisted, then forwarded.
	out := make(chan kubetypes.PodUpdate, 1)
	first, err := checkpoint.New(checkpoint.Config{Dir: dir, Source: kubetypes.SourceHTTP, Out: out})
	if err != nil {
		panic(err)
	}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-edge-1", UID: "1234"}}
	if err := first.Handle(ctx, kubetypes.PodUpdate{Op: kubetypes.SET, Pods: []*v1.Pod{web}}); err != nil {
		panic(err)
	}
	u := <-out
	fmt.Println("live:", u.Op, u.Source, u.Pods[0].Name)

	// Reboot without network: the source never delivers, the persisted set
	// is replayed (Run does this after ReplayAfter).
	second, err := checkpoint.New(checkpoint.Config{Dir: dir, Source: kubetypes.SourceHTTP, Out: out})
	if err != nil {
		panic(err)
	}
	sent, err := second.Replay(ctx)
	u = <-out
	fmt.Println("replayed:", sent, err, u.Op, u.Pods[0].Name, u.Pods[0].UID)
	// Output:
	// live: SET http web-edge-1
	// replayed: true <nil> SET web-edge-1 1234
}
