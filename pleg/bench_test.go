package pleg

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// benchRuntime returns pre-built listings so the benchmark measures the
// PLEG, not the runtime. GetPodStatus returns a shared status.
type benchRuntime struct {
	listings [][]*kubetypes.Pod
	n        int
}

func (b *benchRuntime) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) {
	l := b.listings[b.n%len(b.listings)]
	b.n++
	return l, nil
}

func (b *benchRuntime) GetPodStatus(_ context.Context, uid types.UID, _, _ string) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid}, nil
}

func buildPods(pods, containers int, state func(p, c int) kubetypes.ContainerState) []*kubetypes.Pod {
	out := make([]*kubetypes.Pod, pods)
	for p := range pods {
		pd := &kubetypes.Pod{ID: types.UID(fmt.Sprintf("pod-%d", p)), Name: fmt.Sprintf("pod-%d", p), Namespace: "default"}
		pd.Sandboxes = []*kubetypes.Container{{ID: fmt.Sprintf("sb-%d", p), State: kubetypes.ContainerStateRunning}}
		for c := range containers {
			pd.Containers = append(pd.Containers, &kubetypes.Container{ID: fmt.Sprintf("c-%d-%d", p, c), Name: fmt.Sprintf("c%d", c), State: state(p, c)})
		}
		out[p] = pd
	}
	return out
}

func benchRelist(b *testing.B, pods, containers int, changedEvery int) {
	allRunning := buildPods(pods, containers, func(int, int) kubetypes.ContainerState { return kubetypes.ContainerStateRunning })
	rt := &benchRuntime{listings: [][]*kubetypes.Pod{allRunning}}
	if changedEvery > 0 {
		// Alternate between two listings in which every changedEvery-th pod
		// has its first container running, then exited.
		changed := buildPods(pods, containers, func(p, c int) kubetypes.ContainerState {
			if p%changedEvery == 0 && c == 0 {
				return kubetypes.ContainerStateExited
			}
			return kubetypes.ContainerStateRunning
		})
		rt.listings = append(rt.listings, changed)
	}
	g, err := New(Config{Runtime: rt, Clock: clocktesting.NewFakeClock(epoch), ChannelCapacity: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	// Warm up: the first relists build the records.
	for range 2 {
		if err := g.Relist(ctx); err != nil {
			b.Fatal(err)
		}
	}
	drainAll := func() {
		for len(g.events) > 0 {
			<-g.events
		}
	}
	drainAll()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := g.Relist(ctx); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 {
			b.StopTimer()
			drainAll()
			b.StartTimer()
		}
	}
}

func BenchmarkRelistUnchanged100x10(b *testing.B)  { benchRelist(b, 100, 10, 0) }
func BenchmarkRelistUnchanged1000x10(b *testing.B) { benchRelist(b, 1000, 10, 0) }
func BenchmarkRelist10PercentChanged100x10(b *testing.B) {
	benchRelist(b, 100, 10, 10)
}

// TestRelistUnchangedAllocatesNothing pins the benchmark's main claim.
func TestRelistUnchangedAllocatesNothing(t *testing.T) {
	pods := buildPods(100, 10, func(int, int) kubetypes.ContainerState { return kubetypes.ContainerStateRunning })
	g, err := New(Config{Runtime: &benchRuntime{listings: [][]*kubetypes.Pod{pods}}, Clock: clocktesting.NewFakeClock(epoch), ChannelCapacity: 2000})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	g.RequestReinspect("nobody") // a pending flag of an unlisted pod costs nothing either
	if err := g.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _ = g.Relist(ctx) }); n != 0 {
		t.Fatalf("an unchanged relist allocates %v times", n)
	}
}
