package syncloop

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podworkers"
)

// rsSink records every status it is given, per pod, in order.
type rsSink struct {
	mu  sync.Mutex
	got map[types.UID][]v1.PodStatus
}

func (s *rsSink) SyncPodStatus(_ context.Context, pod *v1.Pod, st v1.PodStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = make(map[types.UID][]v1.PodStatus)
	}
	s.got[pod.UID] = append(s.got[pod.UID], st)
	return nil
}

func (s *rsSink) first(uid types.UID) (v1.PodStatus, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got[uid]) == 0 {
		return v1.PodStatus{}, 0
	}
	return s.got[uid][0], len(s.got[uid])
}

func rsCheckRejected(t *testing.T, s *rsSink, uid types.UID) {
	t.Helper()
	st, n := s.first(uid)
	if n == 0 {
		t.Fatalf("pod %s: no status reported", uid)
	}
	if st.Phase != v1.PodFailed || st.Reason != ReasonNodePorts || st.Message == "" {
		t.Fatalf("pod %s: first status reported is phase %q reason %q message %q, want the rejection", uid, st.Phase, st.Reason, st.Message)
	}
}

// TestRejectedPodFirstStatusIsRejection: a pod rejected at admission on a
// freshly started agent (the pod workers not yet told every pod) reports
// the rejection (Failed, reason, message) as its very first status, at the
// first status sync: the PLEG's listing shows the runtime does not run it.
func TestRejectedPodFirstStatusIsRejection(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	sink := &rsSink{}
	l, _, _ := ltStubLoop(t, clk, func(c *Config) {
		c.StatusSink = sink
		c.PLEG = ltListingPLEG{listing: func() ([]*kubetypes.Pod, time.Time) {
			return []*kubetypes.Pod{{ID: "old-run", Name: "x", Namespace: "default"}}, ltEpoch
		}}
	})
	l.HandlePodAdditions([]*v1.Pod{ltPortPod("new", 5, 8080), ltPortPod("old", 0, 8080)})
	if err := l.StatusManager().SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	rsCheckRejected(t, sink, "new")
}

// TestRejectedPodWithoutListingReportsNothingFirst: without a PLEG
// listing (or when the runtime lists the rejected pod, left by an earlier
// agent) the Failed status waits for housekeeping, and nothing else is
// reported for the pod meanwhile; the first housekeeping lets it go.
func TestRejectedPodWithoutListingReportsNothingFirst(t *testing.T) {
	for name, plg := range map[string]PLEG{
		"no listing": ltPLEG{},
		"listed": ltListingPLEG{listing: func() ([]*kubetypes.Pod, time.Time) {
			return []*kubetypes.Pod{{ID: "new", Name: "new", Namespace: "default"}}, ltEpoch
		}},
	} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(ltEpoch)
			sink := &rsSink{}
			l, _, _ := ltStubLoop(t, clk, func(c *Config) { c.StatusSink = sink; c.PLEG = plg })
			l.HandlePodAdditions([]*v1.Pod{ltPortPod("new", 5, 8080), ltPortPod("old", 0, 8080)})
			if err := l.StatusManager().SyncOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			if st, n := sink.first("new"); n != 0 {
				t.Fatalf("reported %q %q before the rejection could go", st.Phase, st.Reason)
			}
			if err := l.HandlePodCleanups(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := l.StatusManager().SyncOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
			rsCheckRejected(t, sink, "new")
		})
	}
}

// TestRejectedPodWithWorkerFollowsWorkers: the "no containers" mark of a
// rejected pod holds only while the pod has no worker; once it has one,
// the workers answer.
func TestRejectedPodWithWorkerFollowsWorkers(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	l, _, _ := ltStubLoop(t, clk, func(c *Config) {
		c.PLEG = ltListingPLEG{listing: func() ([]*kubetypes.Pod, time.Time) { return nil, ltEpoch }}
	})
	rejected := ltPortPod("new", 5, 8080)
	l.HandlePodAdditions([]*v1.Pod{rejected, ltPortPod("old", 0, 8080)})
	act := loopActivity{l}
	if act.CouldHaveRunningContainers("new") {
		t.Fatal("a rejected pod the runtime does not run could have running containers")
	}
	l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: rejected})
	if !act.CouldHaveRunningContainers("new") {
		t.Fatal("a pod with a live worker is taken to have no containers")
	}
}
