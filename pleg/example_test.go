package pleg_test

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/pleg"
)

// listing is a tiny runtime: what GetPods returns is set by the example.
type listing struct{ pods []*kubetypes.Pod }

func (l *listing) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) { return l.pods, nil }

func (l *listing) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubetypes.PodStatus, error) {
	st := &kubetypes.PodStatus{ID: uid, Name: name, Namespace: ns}
	for _, p := range l.pods {
		for _, c := range p.Containers {
			if p.ID == uid {
				st.ContainerStatuses = append(st.ContainerStatuses, &kubetypes.ContainerStatus{ID: c.ID, Name: c.Name, State: c.State})
			}
		}
	}
	return st, nil
}

func webPod(state kubetypes.ContainerState) *kubetypes.Pod {
	return &kubetypes.Pod{ID: "uid-1", Name: "web", Namespace: "default",
		Containers: []*kubetypes.Container{{ID: "c1", Name: "nginx", State: state}}}
}

func Example() {
	ctx := context.Background()
	rt := &listing{}
	g, err := pleg.New(pleg.Config{Runtime: rt})
	if err != nil {
		panic(err)
	}
	print := func() {
		for len(g.Watch()) > 0 {
			e := <-g.Watch()
			fmt.Println(e.ID, e.Type, e.Data)
		}
	}

	rt.pods = []*kubetypes.Pod{webPod(kubetypes.ContainerStateRunning)}
	_ = g.Relist(ctx) // normally Run relists every second
	print()

	rt.pods = []*kubetypes.Pod{webPod(kubetypes.ContainerStateExited)}
	_ = g.Relist(ctx)
	print()
	st, _ := g.Cache().Get("uid-1")
	fmt.Println(st.Name, st.ContainerStatuses[0].State)

	rt.pods = nil
	_ = g.Relist(ctx)
	print()
	ok, _ := g.Healthy()
	fmt.Println("healthy:", ok)
	// Output:
	// uid-1 ContainerStarted c1
	// uid-1 ContainerDied c1
	// web exited
	// uid-1 ContainerRemoved c1
	// healthy: true
}
