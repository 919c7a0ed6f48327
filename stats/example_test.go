package stats_test

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/stats"
)

// The summary of an agent on the fake runtime: the pods as the runtime
// engine lists them, their containers' simulated CPU and memory.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, _ := fake.New(fake.Config{Clock: clk, Images: []string{"busybox"}})
	mgr, _ := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: rt, Clock: clk})

	// A pod as the runtime engine labels it, its container burning 250m.
	labels := map[string]string{kuberuntime.LabelPodUID: "uid-1", kuberuntime.LabelPodName: "web", kuberuntime.LabelPodNamespace: "default"}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:    &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1"},
		Labels:      labels,
		Annotations: map[string]string{fake.BehaviorAnnotation("app"): "cpu=250m,memory=32Mi"},
	}
	sb, _ := rt.RunPodSandbox(ctx, sbCfg, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"}, Labels: labels,
	}, sbCfg)
	_ = rt.StartContainer(ctx, id)
	clk.Step(10 * time.Second)

	p, err := stats.New(stats.Config{NodeName: "node-1", Runtime: rt, Pods: mgr, Clock: clk})
	if err != nil {
		panic(err)
	}
	s, err := p.Summary(ctx, true)
	if err != nil {
		panic(err)
	}
	for _, pod := range s.Pods {
		for _, c := range pod.Containers {
			fmt.Printf("%s/%s %s: %d nanocores, %d s of CPU, %d MiB\n", pod.PodRef.Namespace, pod.PodRef.Name, c.Name,
				*c.CPU.UsageNanoCores, *c.CPU.UsageCoreNanoSeconds/1e9, *c.Memory.WorkingSetBytes>>20)
		}
	}
	// Output:
	// default/web app: 250000000 nanocores, 2 s of CPU, 32 MiB
}
