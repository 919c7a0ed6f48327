package podworkers_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podworkers"
)

// printSyncer prints what the pod workers ask of it and signals each call.
type printSyncer struct{ calls chan string }

func (s printSyncer) SyncPod(_ context.Context, ut podworkers.UpdateType, pod, _ *v1.Pod, _ *kubetypes.PodStatus) (bool, error) {
	s.calls <- fmt.Sprintf("SyncPod %s %s", ut, pod.Name)
	return false, nil
}

func (s printSyncer) SyncTerminatingPod(_ context.Context, pod *v1.Pod, _ *kubetypes.PodStatus, grace *int64, _ func(*v1.PodStatus)) error {
	s.calls <- fmt.Sprintf("SyncTerminatingPod %s grace=%ds", pod.Name, *grace)
	return nil
}

func (s printSyncer) SyncTerminatingRuntimePod(_ context.Context, p *kubetypes.Pod) error {
	s.calls <- "SyncTerminatingRuntimePod " + p.Name
	return nil
}

func (s printSyncer) SyncTerminatedPod(_ context.Context, pod *v1.Pod, _ *kubetypes.PodStatus) error {
	s.calls <- "SyncTerminatedPod " + pod.Name
	return nil
}

// emptyCache knows no runtime state: every pod has an empty status.
type emptyCache struct{}

func (emptyCache) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid}, nil
}

func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	syncer := printSyncer{calls: make(chan string, 10)}
	pw, err := podworkers.New(podworkers.Config{Syncer: syncer, Cache: emptyCache{}})
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- pw.Run(ctx) }()

	grace := int64(30)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "default"},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: &grace},
	}
	pw.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
	fmt.Println(<-syncer.calls)

	// Evict it with a shorter grace and wait until its containers are stopped.
	short := int64(5)
	if err := pw.KillPodAndWait(ctx, pod, true, &short, nil); err != nil {
		panic(err)
	}
	fmt.Println(<-syncer.calls)
	fmt.Println(<-syncer.calls)
	fmt.Println("known terminated:", pw.IsPodKnownTerminated(pod.UID))

	cancel()
	<-done
	fmt.Println("finished:", pw.ShouldPodBeFinished(pod.UID))
	fmt.Println("content removable:", pw.ShouldPodContentBeRemoved(pod.UID))
	// Output:
	// SyncPod create web
	// SyncTerminatingPod web grace=5s
	// SyncTerminatedPod web
	// known terminated: true
	// finished: true
	// content removable: true
}
