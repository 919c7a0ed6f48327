package nodekit_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kubetypes"
)

// chanSource sends every set it is given as the source's SET.
type chanSource struct {
	out  chan<- kubetypes.PodUpdate
	sets <-chan []*v1.Pod
}

func (s *chanSource) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case pods := <-s.sets:
			select {
			case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: "soak"}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// heapAfterGC is the live heap once the garbage collector has run.
func heapAfterGC() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestSoakHeapBoundedByLivePods churns pods through a whole agent on the
// fake runtime with the defaults (its MemorySink included), 20 at a time:
// each batch is started, waited Running, removed and waited gone. Nothing
// kept per pod may outlive the pod (issue 29): the heap after the last
// batch is within a small margin of the heap after the first few hundred
// pods.
func TestSoakHeapBoundedByLivePods(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const batch, warm, total = 20, 300, 1500
	synctest.Test(t, func(t *testing.T) {
		sets := make(chan []*v1.Pod)
		a, err := nodekit.NewBuilder().WithNodeName("node1").WithFakeRuntime("busybox:1").
			WithRootDir(t.TempDir()).WithLogger(zap.NewNop()).
			WithPodSource("soak", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &chanSource{out: out, sets: sets}, nil
			}).Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		grace := int64(1)
		var warmHeap uint64
		for n := 0; n < total; n += batch {
			var pods []*v1.Pod
			for i := range batch {
				name := fmt.Sprintf("p%d", n+i)
				pods = append(pods, &v1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
						Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: "soak"}},
					Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{
						{Name: "c", Image: "busybox:1", Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}},
					}},
				})
			}
			sets <- pods
			for _, p := range pods {
				if _, _, err := a.WaitForPod(ctx, "default", p.Name, nodekit.PodRunning); err != nil {
					t.Fatal(err)
				}
			}
			sets <- nil
			// Gone: housekeeping (every 2 s) has removed every trace of
			// the batch from the loop and the status manager.
			for len(a.Pods()) > 0 || a.FakeRuntime() == nil {
				<-time.After(time.Second)
			}
			<-time.After(5 * time.Second)
			synctest.Wait()
			if n+batch == warm {
				warmHeap = heapAfterGC()
			}
		}
		end := heapAfterGC()
		if f := os.Getenv("NODEKIT_SOAK_HEAP_PROFILE"); f != "" {
			if out, err := os.Create(f); err == nil {
				_ = pprof.WriteHeapProfile(out)
				_ = out.Close()
			}
		}
		t.Logf("heap after GC: %d bytes after %d pods, %d after %d (%+d bytes, %.1f per pod)",
			warmHeap, warm, end, total, int64(end)-int64(warmHeap), float64(int64(end)-int64(warmHeap))/float64(total-warm))
		if margin := uint64(512 << 10); end > warmHeap+margin {
			t.Errorf("heap grew by %d bytes over %d pods (more than %d): something kept per pod outlives it",
				end-warmHeap, total-warm, margin)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
