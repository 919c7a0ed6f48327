package fakestream

import (
	"net"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// TestPerPodStateForgotten (issue 29): a session URL handed out and never
// used is kept at most its TokenTTL: the next URL handed out drops every
// expired one (a used one goes at once).
func TestPerPodStateForgotten(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	rt, err := fake.New(fake.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	s, err := New(Config{Runtime: rt, Clock: clk, Listener: lis, TokenTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := s.StreamURL(fake.StreamRequest{Kind: fake.StreamExec, ID: "c", Cmd: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Minute + time.Second)
	if _, err := s.StreamURL(fake.StreamRequest{Kind: fake.StreamExec, ID: "c", Cmd: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.requests); n != 1 {
		t.Errorf("%d session URLs kept, want the one not expired", n)
	}
}
