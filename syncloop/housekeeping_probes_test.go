package syncloop

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// cleaningProbes is a prober that can drop the workers of gone pods.
type cleaningProbes struct{ desired []map[types.UID]struct{} }

func (c *cleaningProbes) AddPod(*v1.Pod)                 {}
func (c *cleaningProbes) RemovePod(*v1.Pod)              {}
func (c *cleaningProbes) StopLivenessAndStartup(*v1.Pod) {}
func (c *cleaningProbes) CleanupPods(d map[types.UID]struct{}) {
	c.desired = append(c.desired, d)
}

// Housekeeping hands a prober that can clean up the set of pods that are
// still wanted, so probe workers of pods that went away stop.
func TestHousekeepingCleansUpProbes(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	probes := &cleaningProbes{}
	l, _, _ := ltStubLoop(t, clk, func(c *Config) { c.Probes = probes })
	l.HandlePodAdditions([]*v1.Pod{ltPod("1", "web", 0), ltPod("2", "db", 0)})
	if err := l.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(probes.desired) != 1 {
		t.Fatalf("CleanupPods called %d times, want 1", len(probes.desired))
	}
	got := probes.desired[0]
	if _, ok := got["1"]; !ok || len(got) != 2 {
		t.Fatalf("desired = %v, want pods 1 and 2", got)
	}
}

// cleaningCgroups is a container manager that can remove orphaned pod cgroups.
type cleaningCgroups struct{ keep [][]*v1.Pod }

func (c *cleaningCgroups) EnsurePodCgroup(context.Context, *v1.Pod) error  { return nil }
func (c *cleaningCgroups) DestroyPodCgroup(context.Context, *v1.Pod) error { return nil }
func (c *cleaningCgroups) CleanupOrphans(_ context.Context, active []*v1.Pod, sourcesReady bool) (int, error) {
	if !sourcesReady {
		return 0, nil
	}
	c.keep = append(c.keep, active)
	return 0, nil
}

// Housekeeping asks a container manager to remove the cgroups of pods that
// are gone, keeping those of desired pods.
func TestHousekeepingCleansUpCgroups(t *testing.T) {
	clk := clocktesting.NewFakeClock(ltEpoch)
	cg := &cleaningCgroups{}
	l, _, _ := ltStubLoop(t, clk, func(c *Config) { c.Cgroups = cg })
	l.HandlePodAdditions([]*v1.Pod{ltPod("1", "web", 0)})
	if err := l.HandlePodCleanups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(cg.keep) != 1 {
		t.Fatalf("CleanupOrphans called %d times, want 1", len(cg.keep))
	}
	found := false
	for _, p := range cg.keep[0] {
		found = found || p.UID == "1"
	}
	if !found {
		t.Fatalf("the desired pod's cgroup is not kept: %v", cg.keep[0])
	}
}
