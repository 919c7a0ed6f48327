package nodeshutdown_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodeshutdown"
)

// A shutdown kills the pods in the kubelet's groups; each gets its status.
func Example() {
	critical := int32(2000000000)
	pods := []*v1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dns"}, Spec: v1.PodSpec{Priority: &critical}},
	}
	m, err := nodeshutdown.New(nodeshutdown.Config{
		GracePeriod:             30 * time.Second,
		GracePeriodCriticalPods: 10 * time.Second,
		ActivePods:              func() []*v1.Pod { return pods },
		KillPod: func(_ context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) error {
			var s v1.PodStatus
			status(&s)
			fmt.Printf("kill %s with %ds: %s %s, %s\n", pod.Name, grace, s.Phase, s.Reason, s.Conditions[0].Type)
			return nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("groups:", m.Groups())
	if err := m.Shutdown(context.Background()); err != nil {
		fmt.Println(err)
	}
	ok, reason, _ := m.Admit(&v1.Pod{}, nil)
	fmt.Println("admit:", ok, reason, "ready:", m.ShutdownStatus())
	// Output:
	// groups: [{0 20} {2000000000 10}]
	// kill web with 20s: Failed Terminated, DisruptionTarget
	// kill dns with 10s: Failed Terminated, DisruptionTarget
	// admit: false NodeShutdown ready: node is shutting down
}

// The state file carries the last shutdown's times across a reboot: the
// next manager on the same directory (Run calls LoadState) shows them in
// its gauges, as a kubelet does.
func ExampleManager_LoadState() {
	dir, err := os.MkdirTemp("", "nodeshutdown")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	cfg := nodeshutdown.Config{
		GracePeriod: 30 * time.Second,
		ActivePods:  func() []*v1.Pod { return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "web"}}} },
		KillPod: func(context.Context, *v1.Pod, int64, func(*v1.PodStatus)) error {
			clk.Step(12 * time.Second) // the pod takes 12s to stop
			return nil
		},
		StateDir:   dir, // the agent's root directory (agentshutdown does this)
		Registerer: prometheus.NewRegistry(),
		Clock:      clk,
	}
	m, err := nodeshutdown.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := m.Shutdown(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, nodeshutdown.StateFileName))
	fmt.Println(string(b), err)

	// After the reboot.
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	m, err = nodeshutdown.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := m.LoadState(); err != nil {
		fmt.Println(err)
		return
	}
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		fmt.Printf("%s %.0f\n", mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
	}
	// Output:
	// {"startTime":"2026-03-01T10:00:00Z","endTime":"2026-03-01T10:00:12Z"} <nil>
	// kubelet_graceful_shutdown_end_time_seconds 1772359212
	// kubelet_graceful_shutdown_start_time_seconds 1772359200
}
