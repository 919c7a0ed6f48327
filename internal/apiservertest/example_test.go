package apiservertest_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/internal/apiservertest"
)

func ExampleWatchPods() {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(t0)
	client := fake.NewClientset()
	w := apiservertest.WatchPods(ctx, client, "default", clk)
	defer w.Stop()
	for !w.HasSynced() {
		<-time.After(10 * time.Millisecond)
	}

	w.Creating("web")
	clk.SetTime(t0.Add(1500 * time.Millisecond)) // the pod is Running 1.5 s later
	_, _ = client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Status: v1.PodStatus{Phase: v1.PodRunning}}, metav1.CreateOptions{})
	for w.Running() < 1 {
		<-time.After(10 * time.Millisecond)
	}
	fmt.Println(w.RunningLatencies())
	// Output: [1.5s]
}
