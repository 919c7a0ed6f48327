package eviction_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/eviction"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type oneSummary struct{ s eviction.Summary }

func (o oneSummary) Summary(context.Context) (*eviction.Summary, error) { return &o.s, nil }

// A hard memory threshold is crossed: the manager reports memory pressure,
// rejects a BestEffort pod, and evicts the pod using the most memory.
func Example() {
	ts, err := eviction.ParseThresholds(map[string]string{"memory.available": "1Gi"}, nil, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "small", UID: "small"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hog", UID: "hog"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}},
	}
	stats := oneSummary{eviction.Summary{
		Memory: &eviction.MemoryStats{AvailableBytes: 512 << 20, WorkingSetBytes: 7 << 30},
		Pods: []eviction.PodStats{
			{UID: "small", MemoryWorkingSetBytes: 10 << 20},
			{UID: "hog", MemoryWorkingSetBytes: 3 << 30, Containers: []eviction.ContainerStats{{Name: "app", MemoryWorkingSetBytes: 3 << 30}}},
		},
	}}
	m, err := eviction.New(eviction.Config{
		Thresholds: ts,
		Stats:      stats,
		ActivePods: func() []*v1.Pod { return pods },
		KillPod: func(_ context.Context, pod *v1.Pod, status v1.PodStatus, grace int64) error {
			fmt.Printf("kill %s (grace %ds): %s: %q\n", pod.Name, grace, status.Reason, status.Message)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := m.SyncOnce(context.TODO()); err != nil {
		fmt.Println(err)
	}
	fmt.Println("memory pressure:", m.IsUnderMemoryPressure())
	ok, reason, msg := m.Admit(&v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "new"}}}}, pods)
	fmt.Printf("admit BestEffort: %v %s %q\n", ok, reason, msg)
	// Output:
	// kill hog (grace 1s): Evicted: "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. Container app was using 3Gi, request is 0, has larger consumption of memory. "
	// memory pressure: true
	// admit BestEffort: false Evicted "The node had condition: [MemoryPressure]. "
}

// Parsing rejects what the kubelet would silently accept or hang on.
func ExampleParseThresholds() {
	for _, v := range []string{"NaN%", "1e-99999999", "0%"} {
		ts, err := eviction.ParseThresholds(map[string]string{"memory.available": v}, nil, nil, nil)
		fmt.Println(len(ts), err)
	}
	// Output:
	// 0 eviction: invalid threshold: memory.available: "NaN%" is not a percentage
	// 0 eviction: invalid threshold: memory.available: exponent of "1e-99999999" is out of range (|e| <= 30)
	// 0 <nil>
}

// When node allocatable is enforced on the pods cgroup, each hard
// memory.available threshold also guards allocatableMemory.available.
func ExampleWithAllocatableThresholds() {
	ts, err := eviction.ParseThresholds(map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		nil, nil, map[string]string{"memory.available": "50Mi"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range eviction.WithAllocatableThresholds(ts) {
		fmt.Println(t)
	}
	// Output:
	// memory.available<100Mi minReclaim=50Mi
	// nodefs.available<10%
	// allocatableMemory.available<100Mi minReclaim=50Mi
}

// FakeStats stands in for CgroupStats in tests: what is set is what the
// manager observes; an error set makes the cycle fail.
func ExampleFakeStats() {
	stats := eviction.NewFakeStats(&eviction.Summary{PID: &eviction.PIDStats{MaxPID: 1000, NumProcesses: 950}})
	ts, _ := eviction.ParseThresholds(map[string]string{"pid.available": "100"}, nil, nil, nil)
	m, err := eviction.New(eviction.Config{
		Thresholds: ts, Stats: stats,
		ActivePods: func() []*v1.Pod { return nil },
		KillPod:    func(context.Context, *v1.Pod, v1.PodStatus, int64) error { return nil },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.TODO()
	_, err = m.SyncOnce(ctx)
	fmt.Println(m.NodeConditions(), err)
	stats.SetError(errors.New("cgroup gone"))
	_, err = m.SyncOnce(ctx)
	fmt.Println(err)
	// Output:
	// [PIDPressure] <nil>
	// eviction: stats unavailable: cgroup gone
}
