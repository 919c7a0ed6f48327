package apiserver_test

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/apiserver"
)

// A node registers with an API server (here client-go's fake clientset),
// reports its status and takes its lease.
func Example() {
	ctx := context.Background()
	client := fake.NewClientset()
	sink, _ := apiserver.NewSink(apiserver.SinkConfig{Client: client, NodeName: "edge-1"})
	ctrl, _ := nodestatus.New(nodestatus.Config{
		NodeName: "edge-1",
		Sink:     sink,
		Setters: nodestatus.DefaultSetters(nodestatus.SettersConfig{
			Address: nodestatus.AddressConfig{Hostname: "192.0.2.10"},
			Machine: nodestatus.MachineInfoConfig{Machine: func(context.Context) (*nodestatus.Machine, error) {
				return &nodestatus.Machine{NumCores: 2, MemoryCapacity: 4 << 30}, nil
			}},
		}),
	})
	lease, _ := apiserver.NewLease(apiserver.LeaseConfig{Client: client, NodeName: "edge-1"})
	if err := ctrl.SyncOnce(ctx); err != nil {
		fmt.Println(err)
		return
	}
	if err := lease.SyncOnce(ctx); err != nil {
		fmt.Println(err)
		return
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "edge-1", metav1.GetOptions{})
	for _, c := range node.Status.Conditions {
		if c.Type == v1.NodeReady {
			fmt.Println("Ready:", c.Status, c.Reason)
		}
	}
	l, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "edge-1", metav1.GetOptions{})
	fmt.Println("lease holder:", *l.Spec.HolderIdentity, "duration:", *l.Spec.LeaseDurationSeconds, "owner:", l.OwnerReferences[0].Kind)
	// Output:
	// Ready: True KubeletReady
	// lease holder: edge-1 duration: 40 owner: Node
}
