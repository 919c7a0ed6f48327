package syncloop_test

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/syncloop"
)

// idleRuntime runs nothing (a real agent passes a *kuberuntime.Manager).
type idleRuntime struct{}

func (idleRuntime) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) { return nil, nil }
func (idleRuntime) GetPodStatus(_ context.Context, uid types.UID, name, ns string) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
}
func (idleRuntime) SyncPod(context.Context, *v1.Pod, *kubetypes.PodStatus, []v1.Secret) kubetypes.SyncResult {
	return kubetypes.SyncResult{}
}
func (idleRuntime) KillPod(context.Context, *v1.Pod, *kubetypes.Pod, *int64) error { return nil }
func (idleRuntime) GarbageCollect(context.Context, kubetypes.GCPolicy, kubetypes.PodStateProvider, bool) error {
	return nil
}
func (idleRuntime) Reason(types.UID, string) (string, string) { return "", "" }

// Two pods ask for the same host port: the older is admitted and handed to
// its pod worker, the newer is rejected with the kubelet's reason.
func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	updates := make(chan kubetypes.PodUpdate, 1)
	loop, err := syncloop.New(syncloop.Config{
		Updates: updates,
		Runtime: idleRuntime{},
		PLEG:    emptyPLEG{}, // a real agent passes a pleg.GenericPLEG
		Clock:   clocktesting.NewFakeClock(start),
	})
	if err != nil {
		panic(err)
	}
	pod := func(name string, created time.Duration) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), CreationTimestamp: metav1.NewTime(start.Add(created))},
			Spec: v1.PodSpec{Containers: []v1.Container{{
				Name: "web", Image: "nginx", Ports: []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080}},
			}}},
		}
	}
	updates <- kubetypes.PodUpdate{Op: kubetypes.ADD, Source: "file", Pods: []*v1.Pod{pod("second", time.Minute), pod("first", 0)}}
	loop.Iterate(context.Background())

	for _, p := range loop.Pods() {
		st, _ := loop.StatusManager().GetPodStatus(p.UID)
		if st.Phase == v1.PodFailed {
			fmt.Printf("%s: %s %s: %s\n", p.Name, st.Phase, st.Reason, st.Message)
			continue
		}
		fmt.Printf("%s: admitted\n", p.Name)
	}
	// Output:
	// first: admitted
	// second: Failed NodePorts: Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports
}

// emptyPLEG knows no runtime state: every pod has an empty status.
type emptyPLEG struct{}

func (emptyPLEG) GetNewerThan(_ context.Context, uid types.UID, _ time.Time) (*kubetypes.PodStatus, error) {
	return &kubetypes.PodStatus{ID: uid}, nil
}
func (emptyPLEG) Healthy() (bool, error)  { return true, nil }
func (emptyPLEG) RequestRelist(types.UID) {}
