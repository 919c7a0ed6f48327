package pleg

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestPerPodStateForgotten (issue 29): once its pods are gone from the
// runtime, a relist leaves nothing of them in the PLEG (its per-pod
// records, reinspect requests, holds, exits reported by events) or in its
// cache (statuses and the waiters of GetNewerThan whose context ended).
func TestPerPodStateForgotten(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ChannelCapacity = 1 }) // most events are dropped
	var listed []string
	for i := range 50 {
		uid := fmt.Sprintf("p%d", i)
		f.rt.setPods(append(f.rt.pods, pod(uid, ctr("c"+uid, running)))...)
		listed = append(listed, uid)
	}
	f.relist(t)
	for i, uid := range listed {
		switch i % 4 {
		case 0:
			f.g.RequestReinspect(types.UID(uid))
		case 1:
			f.g.HoldPod(types.UID(uid))
			f.g.ReleasePod(types.UID(uid))
		case 2:
			f.g.ContainerExited(t.Context(), ContainerExit{ID: "c" + uid, ExitCode: 1, FinishedAt: epoch})
		case 3:
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, _ = f.g.Cache().GetNewerThan(ctx, types.UID(uid), epoch.Add(time.Hour))
		}
	}
	// An exit of a container no listing ever shows.
	f.g.ContainerExited(t.Context(), ContainerExit{ID: "never-listed", ExitCode: 1, FinishedAt: epoch})
	if f.g.Cache().Len() != 50 || len(f.g.records) != 50 {
		t.Fatalf("before: %d cached, %d records", f.g.Cache().Len(), len(f.g.records))
	}

	f.rt.setPods()
	f.clock.Step(time.Second)
	f.relist(t)
	f.clock.Step(time.Second)
	f.relist(t)

	f.g.mu.Lock()
	re, held, listing := len(f.g.reinspect), len(f.g.held), len(f.g.listing)
	f.g.mu.Unlock()
	if n := len(f.g.records) + len(f.g.reinspectNow) + re + held + listing; n != 0 {
		t.Errorf("PLEG keeps %d records, %d reinspect (+%d taken), %d holds, %d listed pods",
			len(f.g.records), re, len(f.g.reinspectNow), held, listing)
	}
	if n := f.g.PendingExits(); n != 0 {
		t.Errorf("PLEG keeps %d exits", n)
	}
	if n := f.g.Cache().Len(); n != 0 {
		t.Errorf("cache keeps %d pods", n)
	}
	if n := f.g.Cache().waiting(); n != 0 {
		t.Errorf("cache keeps %d waiters", n)
	}
}
