package syncloop

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// getPodsCounter is an ltStub whose listing is one pod "fresh", counted.
type getPodsCounter struct {
	*ltStub
	calls int
}

func (g *getPodsCounter) GetPods(context.Context, bool) ([]*kubetypes.Pod, error) {
	g.calls++
	return []*kubetypes.Pod{{ID: "fresh"}}, nil
}

// Housekeeping takes the PLEG's listing while it is at most 2s old, and
// lists the runtime itself before the first relist and after that.
func TestRecentListing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	var listed []*kubetypes.Pod
	var at time.Time
	var rt *getPodsCounter
	l, _, _ := ltStubLoop(t, clk, func(c *Config) {
		rt = &getPodsCounter{ltStub: c.Runtime.(*ltStub)}
		c.Runtime = rt
		c.PLEG = ltListingPLEG{listing: func() ([]*kubetypes.Pod, time.Time) { return listed, at }}
	})
	for _, tc := range []struct {
		name      string
		listedAgo time.Duration // <0: no relist yet
		want      string
		calls     int
	}{
		{"no relist yet", -1, "fresh", 1},
		{"just listed", 0, "listed", 1},
		{"2s old", 2 * time.Second, "listed", 1},
		{"older", 2*time.Second + time.Millisecond, "fresh", 2},
	} {
		listed, at = nil, time.Time{}
		if tc.listedAgo >= 0 {
			listed, at = []*kubetypes.Pod{{ID: "listed"}}, clk.Now().Add(-tc.listedAgo)
		}
		pods, err := l.runtimePods(t.Context())
		if err != nil || len(pods) != 1 || string(pods[0].ID) != tc.want || rt.calls != tc.calls {
			t.Fatalf("%s: pods %v, %v, runtime listed %d times; want %s and %d", tc.name, pods, err, rt.calls, tc.want, tc.calls)
		}
	}
}
