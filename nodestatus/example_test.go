package nodestatus_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
)

// An agent without a cluster keeps its node object in a Local sink.
func Example() {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	machine := func(context.Context) (*nodestatus.Machine, error) {
		return &nodestatus.Machine{NumCores: 4, MemoryCapacity: 8 << 30}, nil
	}
	sink, _ := nodestatus.NewLocal(nodestatus.LocalConfig{})
	ctrl, err := nodestatus.New(nodestatus.Config{
		NodeName: "edge-1",
		Sink:     sink,
		Clock:    clk,
		Setters: nodestatus.DefaultSetters(nodestatus.SettersConfig{
			Clock:   clk,
			Address: nodestatus.AddressConfig{Hostname: "192.0.2.10"},
			Machine: nodestatus.MachineInfoConfig{
				Machine:     machine,
				Reservation: func() v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")} },
			},
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := ctrl.SyncOnce(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	node := sink.Node()
	alloc := node.Status.Allocatable[v1.ResourceMemory]
	fmt.Println("address:", node.Status.Addresses[0].Address)
	fmt.Println("cpu:", node.Status.Capacity.Cpu(), "pods:", node.Status.Capacity.Pods(), "allocatable memory:", alloc.String())
	for _, c := range node.Status.Conditions {
		fmt.Println(c.Type, c.Status, c.Reason)
	}
	// Output:
	// address: 192.0.2.10
	// cpu: 4 pods: 110 allocatable memory: 7Gi
	// MemoryPressure False KubeletHasSufficientMemory
	// DiskPressure False KubeletHasNoDiskPressure
	// PIDPressure False KubeletHasSufficientPID
	// Ready True KubeletReady
}
