package prober

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// BenchmarkProbes110Pods: 110 pods with 3 exec probes each (liveness and
// readiness on one container, readiness on a second) at period 1s, against
// runtime/fake's ExecSync. One op is one period: every one of the 330
// workers runs its probe once. It reports the CPU time and allocations per
// probe.
func BenchmarkProbes110Pods(b *testing.B) {
	const pods, probesPerPod = 110, 3
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}, MaxCalls: 1000})
	if err != nil {
		b.Fatal(err)
	}
	var count, target atomic.Int64
	round := make(chan struct{}, 1)
	rt.SetExecHandler(func(string, []string) ([]byte, []byte, int32, error) {
		if count.Add(1) == target.Load() {
			round <- struct{}{}
		}
		return []byte("ok"), nil, 0, nil
	})
	ctx := b.Context()
	st := &fakeStatus{}
	probe := func() *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1}
	}
	var list []*v1.Pod
	started := true
	for i := range pods {
		name := fmt.Sprintf("pod-%d", i)
		uid := types.UID("uid-" + name)
		sb, err := rt.RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(uid)},
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
		}, "")
		if err != nil {
			b.Fatal(err)
		}
		status := v1.PodStatus{Phase: v1.PodRunning}
		for _, c := range []string{"app", "side"} {
			id, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: c}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
				Command: []string{"sleep", "infinity"}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := rt.StartContainer(ctx, id); err != nil {
				b.Fatal(err)
			}
			status.ContainerStatuses = append(status.ContainerStatuses, v1.ContainerStatus{
				Name: c, ContainerID: "containerd://" + id, Started: &started,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(clk.Now())}},
			})
		}
		st.setStatus(uid, status)
		list = append(list, &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default"},
			Spec: v1.PodSpec{Containers: []v1.Container{
				{Name: "app", LivenessProbe: probe(), ReadinessProbe: probe()},
				{Name: "side", ReadinessProbe: probe()},
			}},
		})
	}
	m, err := New(Config{Status: st, Exec: rt, Clock: clk, Jitter: func(time.Duration) time.Duration { return 0 }})
	if err != nil {
		b.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = m.Run(rctx) }()
	go func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-m.Updates():
			}
		}
	}()
	// The first round runs as the pods are added.
	target.Store(pods * probesPerPod)
	for _, p := range list {
		m.AddPod(p)
	}
	<-round
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	var ru0, ru1 syscall.Rusage
	runtime.ReadMemStats(&ms0)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		target.Add(pods * probesPerPod)
		clk.Step(time.Second)
		<-round
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&ms1)
	probes := float64(b.N * pods * probesPerPod)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/probes, "wall-ns/probe")
	b.ReportMetric(float64(cpu.Nanoseconds())/probes, "cpu-ns/probe")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/probes, "allocs/probe")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/probes, "B/probe")
	cancel()
	<-done
}
