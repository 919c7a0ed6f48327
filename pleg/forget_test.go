package pleg

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
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

// TestDroppedEventsRedelivered: each pod that lost an event to a full
// Watch channel gets a PodSync once the channel has room (after a later
// relist), so the consumer syncs it and reads its current status; nothing
// is remembered once delivered.
func TestDroppedEventsRedelivered(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ChannelCapacity = 2 })
	var all []*kubetypes.Pod
	for i := range 10 {
		all = append(all, pod(fmt.Sprintf("p%d", i), ctr(fmt.Sprintf("c%d", i), running)))
	}
	f.rt.setPods(all...)
	f.relist(t)
	first := drain(f.g.Watch())
	if len(first) != 2 || f.g.DroppedEvents() != 8 {
		t.Fatalf("delivered %v, dropped %d; want 2 and 8", first, f.g.DroppedEvents())
	}
	got := map[string]bool{}
	for _, e := range first {
		got[strings.SplitN(e, "/", 2)[0]] = true
	}
	// Nothing changes in the runtime: the relists only make room for the
	// PodSyncs of the pods that lost their event.
	for range 10 {
		f.clock.Step(time.Second)
		f.relist(t)
		for _, e := range drain(f.g.Watch()) {
			uid, typ, _ := strings.Cut(e, "/")
			if typ != string(kubetypes.PodSync) || got[uid] {
				t.Fatalf("unexpected event %s", e)
			}
			got[uid] = true
		}
	}
	if len(got) != 10 {
		t.Errorf("%d of 10 pods heard of: %v", len(got), got)
	}
	if n := f.g.redeliverLen.Load(); n != 0 || len(f.g.redeliver) != 0 {
		t.Errorf("%d pods still waiting for a PodSync", len(f.g.redeliver))
	}
}

// TestReinspectFlagOfUnlistedPodExpires: a reinspect request for a pod no
// relist ever lists (it was never created, or is gone) is dropped after
// maxReinspectMisses relists; one for a pod listed later is served.
func TestReinspectFlagOfUnlistedPodExpires(t *testing.T) {
	f := newFixture(t, nil)
	f.g.RequestReinspect("never")
	f.g.RequestReinspect("later")
	f.relist(t)
	f.rt.setPods(pod("later", ctr("c", running)))
	f.relist(t)
	drain(f.g.Watch())
	for range maxReinspectMisses {
		f.relist(t)
	}
	f.g.mu.Lock()
	n := len(f.g.reinspect)
	f.g.mu.Unlock()
	if n != 0 || len(f.g.reinspectMisses) != 0 {
		t.Errorf("%d reinspect flags, %d miss counts kept", n, len(f.g.reinspectMisses))
	}
}
