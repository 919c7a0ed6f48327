package cmwire_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
)

// nameSink records the latest status of every pod by name and signals
// every change.
type nameSink struct {
	mu      sync.Mutex
	status  map[string]v1.PodStatus
	changed chan struct{}
}

func newNameSink() *nameSink {
	return &nameSink{status: map[string]v1.PodStatus{}, changed: make(chan struct{}, 1)}
}

func (s *nameSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	s.status[pod.Name] = *st.DeepCopy()
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return nil
}

func (s *nameSink) phases() map[string]v1.PodPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]v1.PodPhase{}
	for n, st := range s.status {
		out[n] = st.Phase
	}
	return out
}

// waitUntil checks cond whenever wake fires (and every 50ms) until it holds,
// or fails the test after timeout. It never sleeps.
func waitUntil(t *testing.T, timeout time.Duration, wake <-chan struct{}, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s: %s", timeout, what, detail)
		case <-wake:
		case <-tick.C:
		}
	}
}

// podManifest is a static pod running cmd in busybox, its resources to be
// appended.
func podManifest(name, cmd string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1
    command: ["sh", "-c", %q]
`, name, cmd)
}

const forever = "trap 'exit 0' TERM; sleep 3600 & wait"

func startAgent(t *testing.T, a *nodekit.Agent) (cancel func() error) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	return func() error {
		stop()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of the cancel")
			return nil
		}
	}
}
