// Package agenttest holds the helpers that tests of a whole agent on the
// fake runtime and the real clock share across packages (the root
// package's and containermgr/cmwire's): a status sink keyed by pod name,
// a wait that wakes on its changes, a static pod manifest and an agent run
// that can be stopped and waited for. For tests in virtual time use
// nodekittest instead.
package agenttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
)

// NameSink is a podstatus.Sink that keeps the latest status of every pod
// by name and signals every change on Changed.
type NameSink struct {
	mu      sync.Mutex
	status  map[string]v1.PodStatus
	changed chan struct{}
}

// NewNameSink returns an empty NameSink.
func NewNameSink() *NameSink {
	return &NameSink{status: map[string]v1.PodStatus{}, changed: make(chan struct{}, 1)}
}

// SyncPodStatus implements podstatus.Sink.
func (s *NameSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	s.status[pod.Name] = *st.DeepCopy()
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	return nil
}

// Changed receives after every status change (coalesced).
func (s *NameSink) Changed() <-chan struct{} { return s.changed }

// Status is the latest status of the pod named name, and whether there is one.
func (s *NameSink) Status(name string) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.status[name]
	return st, ok
}

// Phases is the latest phase of every pod, by name.
func (s *NameSink) Phases() map[string]v1.PodPhase {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]v1.PodPhase{}
	for n, st := range s.status {
		out[n] = st.Phase
	}
	return out
}

// WaitUntil checks cond whenever wake fires (and every 50ms) until it
// holds, or fails the test after timeout naming what and cond's detail.
// It never sleeps.
func WaitUntil(t testing.TB, timeout time.Duration, wake <-chan struct{}, what string, cond func() (bool, string)) {
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

// PodManifest is a static pod (host network, grace period 2 s) running
// cmd with sh in busybox:1; append resources to its container if needed.
func PodManifest(name, cmd string) string {
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

// Forever is a command that runs until SIGTERM and then exits 0.
const Forever = "trap 'exit 0' TERM; sleep 3600 & wait"

// StartAgent runs a in a goroutine until the test ends or the returned
// stop is called; stop cancels the run and returns Run's error, failing
// the test when Run does not return within 30 s.
func StartAgent(t testing.TB, a *nodekit.Agent) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	return func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Run did not return within 30s of the cancel")
			return nil
		}
	}
}
