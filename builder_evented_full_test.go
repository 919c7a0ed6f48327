package nodekit_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
	"github.com/nodekit/nodekit/syncloop"
)

// TestEventedPLEGFullChannelDoesNotWedge: a burst of container events
// larger than the PLEG's channel, arriving while the sync loop is busy,
// fills the channel. The loop must go on reading it: the PLEG drops what
// does not fit and makes it up later, so a full channel is no reason to
// stop syncing. (A PLEG that reported itself unhealthy while its channel
// was full, as the kubelet's evented PLEG does, stopped the loop for good:
// the loop skips its iterations while the PLEG is unhealthy, so nothing
// read the channel again. Seen after a minute of pod churn, when container
// GC removed some 2,000 dead containers at once.)
func TestEventedPLEGFullChannelDoesNotWedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		blocked, release := make(chan struct{}), make(chan struct{})
		sets := make(chan []*v1.Pod)
		sink := agenttest.NewNameSink()
		a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
			WithRootDir(t.TempDir()).WithStatusSink(sink).WithEventedPLEG().WithLogger(zap.NewNop()).
			WithAdmitHandler(syncloop.AdmitFunc(func(p *v1.Pod, _ []*v1.Pod) syncloop.AdmitResult {
				if p.Name == "blocker" {
					close(blocked)
					<-release // holds the sync loop in HandlePodAdditions
				}
				return syncloop.AdmitResult{Admit: true}
			})).
			WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &chanSource{out: out, sets: sets}, nil
			}).Build()
		if err != nil {
			t.Fatal(err)
		}
		stop := agenttest.StartAgent(t, a)
		pod := func(name string) *v1.Pod {
			return &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
				Spec: v1.PodSpec{HostNetwork: true,
					Containers: []v1.Container{{Name: "main", Image: "busybox:1"}}},
			}
		}
		// Sandboxes the agent does not know, made behind its back.
		ctx := t.Context()
		var foreign []string
		for i := range pleg.DefaultChannelCapacity {
			uid := fmt.Sprintf("foreign-%d", i)
			id, err := a.FakeRuntime().RunPodSandbox(ctx, &runtimeapi.PodSandboxConfig{
				Metadata: &runtimeapi.PodSandboxMetadata{Name: uid, Namespace: "other", Uid: uid},
			}, "")
			if err != nil {
				t.Fatal(err)
			}
			foreign = append(foreign, id)
		}
		sets <- []*v1.Pod{pod("blocker")}
		<-blocked
		synctest.Wait() // the PLEG follows the event stream by now
		// Removed while the loop is busy, as container GC removes the dead
		// containers of many pods at once: each removal is a ContainerDied
		// and a ContainerRemoved, twice what the channel holds.
		for _, id := range foreign {
			if err := a.FakeRuntime().StopPodSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
			if err := a.FakeRuntime().RemovePodSandbox(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		events := a.PLEG().Watch()
		if n := len(events); n != cap(events) {
			close(release)
			_ = stop()
			t.Fatalf("the burst left %d of %d events in the PLEG's channel; the test needs it full", n, cap(events))
		}
		close(release)

		sets <- []*v1.Pod{pod("blocker"), pod("after")}
		agenttest.WaitUntil(t, time.Minute, sink.Changed(), "both pods Running after the burst", func() (bool, string) {
			ph := sink.Phases()
			return ph["blocker"] == v1.PodRunning && ph["after"] == v1.PodRunning, fmt.Sprint(ph)
		})
		if ok, err := a.EventedPLEG().Healthy(); !ok {
			t.Errorf("PLEG unhealthy after the burst: %v", err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	})
}
