package eviction

// Behaviours pinned by the kubelet's eviction tests (eviction_manager_test.go
// and helpers_test.go) that the other test files do not already cover.

import (
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

func withEphemeral(p *v1.Pod, req string) *v1.Pod {
	if p.Spec.Containers[0].Resources.Requests == nil {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{}
	}
	p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse(req)
	return p
}

func pidSummary(maxPID, procs uint64, perPod map[string]uint64) *Summary {
	s := &Summary{PID: &PIDStats{MaxPID: maxPID, NumProcesses: procs}}
	for name, n := range perPod {
		s.Pods = append(s.Pods, PodStats{UID: types.UID(name), Processes: n})
	}
	return s
}

// TestPIDPressure (kubelet TestPIDPressure): a soft pid threshold gives
// PIDPressure at once and rejects every non-critical pod; after the grace
// the lowest-priority pod with the most processes is evicted with the soft
// grace; a hard threshold evicts with grace 1; the condition lingers.
func TestPIDPressure(t *testing.T) {
	ts := mustParse(t, map[string]string{"pid.available": "1000"}, map[string]string{"pid.available": "1500"},
		map[string]string{"pid.available": "1m30s"}, nil)
	low := mkPod("low-many", 0, "", "")
	lowFew := mkPod("low-few", 0, "1Gi", "1Gi")
	high := mkPod("high-most", 100, "", "")
	h := newHarness(t, ts, []*v1.Pod{high, lowFew, low}, Config{})
	per := map[string]uint64{"low-many": 500, "low-few": 5, "high-most": 2000}

	h.stats.s = pidSummary(4000, 2000, per)
	if got := h.sync(t); got != nil || h.m.IsUnderPIDPressure() {
		t.Fatalf("no pressure expected; evicted %v", names(got))
	}
	h.clock.Step(time.Minute)
	h.stats.s = pidSummary(4000, 2800, per) // 1200 available: soft met
	if got := h.sync(t); got != nil {
		t.Fatalf("evicted before grace: %v", names(got))
	}
	if !h.m.IsUnderPIDPressure() || h.m.IsUnderMemoryPressure() || h.m.IsUnderDiskPressure() {
		t.Fatalf("conditions %v, want PIDPressure only", h.m.NodeConditions())
	}
	for _, p := range []*v1.Pod{mkPod("be", 0, "", ""), mkPod("gu", 0, "1Gi", "1Gi")} {
		ok, reason, msg := h.m.Admit(p, nil)
		if ok || reason != Reason || msg != "The node had condition: [PIDPressure]. " {
			t.Errorf("admit %s under PID pressure = %v %q %q", p.Name, ok, reason, msg)
		}
	}
	if ok, _, _ := h.m.Admit(mkPod("crit", kubetypes.SystemCriticalPriority, "", ""), nil); !ok {
		t.Error("critical pod rejected under PID pressure")
	}
	h.clock.Step(2 * time.Minute)
	got := h.sync(t)
	if names(got) != "low-many" || h.kills[0].grace != DefaultMaxPodGracePeriodSeconds {
		t.Fatalf("soft: evicted %v grace %v, want low-many with %d", names(got), h.kills, DefaultMaxPodGracePeriodSeconds)
	}
	if msg := h.kills[0].status.Message; msg != "The node was low on resource: pids. Threshold quantity: 1500, available: 1200. " {
		t.Errorf("message %q", msg)
	}
	h.pods = []*v1.Pod{high, lowFew}
	h.clock.Step(time.Second)
	h.stats.s = pidSummary(4000, 3500, per) // 500 available: hard met
	if got := h.sync(t); names(got) != "low-few" || h.kills[1].grace != 1 {
		t.Fatalf("hard: evicted %v grace %d, want low-few with 1", names(got), h.kills[1].grace)
	}
	h.clock.Step(time.Second)
	h.stats.s = pidSummary(4000, 10, per)
	if got := h.sync(t); got != nil || !h.m.IsUnderPIDPressure() {
		t.Fatalf("want PIDPressure to linger without eviction; evicted %v", names(got))
	}
	h.clock.Step(DefaultPressureTransitionPeriod)
	h.sync(t)
	if h.m.IsUnderPIDPressure() {
		t.Fatal("PIDPressure held past the transition period")
	}
}

func diskSummary(availMi uint64, root, logs map[string]uint64) *Summary {
	s := &Summary{NodeFs: &FsStats{AvailableBytes: mi(availMi), CapacityBytes: mi(16 << 10), InodesFree: 1 << 20, Inodes: 1 << 21}}
	for name, r := range root {
		s.Pods = append(s.Pods, PodStats{UID: types.UID(name), RootfsBytes: mi(r), LogsBytes: mi(logs[name]),
			Containers: []ContainerStats{{Name: "c", RootfsBytes: mi(r), LogsBytes: mi(logs[name])}}})
	}
	return s
}

// TestDiskPressureNodeFs (kubelet TestDiskPressureNodeFs): soft then hard
// nodefs thresholds; pods over their ephemeral-storage request go first;
// DiskPressure rejects all but critical pods.
func TestDiskPressureNodeFs(t *testing.T) {
	ts := mustParse(t, map[string]string{"nodefs.available": "1Gi"}, map[string]string{"nodefs.available": "2Gi"},
		map[string]string{"nodefs.available": "1m30s"}, nil)
	under := withEphemeral(mkPod("under", 0, "", ""), "1Gi")
	over := withEphemeral(mkPod("over", 10, "", ""), "100Mi")
	none := mkPod("no-request", 0, "", "")
	grace := int64(3)
	over.Spec.TerminationGracePeriodSeconds = &grace
	h := newHarness(t, ts, []*v1.Pod{under, none, over}, Config{})
	root := map[string]uint64{"under": 900, "over": 200, "no-request": 50}
	logs := map[string]uint64{"over": 20}

	h.stats.s = diskSummary(4096, root, logs)
	if got := h.sync(t); got != nil || h.m.IsUnderDiskPressure() {
		t.Fatalf("no pressure expected; evicted %v", names(got))
	}
	h.clock.Step(time.Minute)
	h.stats.s = diskSummary(1536, root, logs)
	if got := h.sync(t); got != nil || !h.m.IsUnderDiskPressure() {
		t.Fatalf("soft met: want DiskPressure and no eviction before grace; evicted %v", names(got))
	}
	ok, reason, msg := h.m.Admit(mkPod("bu", 0, "1Mi", ""), nil)
	if ok || reason != Reason || msg != "The node had condition: [DiskPressure]. " {
		t.Fatalf("admit under DiskPressure = %v %q %q", ok, reason, msg)
	}
	h.clock.Step(2 * time.Minute)
	// Both "over" (220Mi > 100Mi, priority 10) and "no-request" (50Mi > 0,
	// priority 0) exceed their requests: the lower priority goes first.
	if got := h.sync(t); names(got) != "no-request" || h.kills[0].grace != DefaultMaxPodGracePeriodSeconds {
		t.Fatalf("soft: evicted %v, want no-request", names(got))
	}
	h.pods = []*v1.Pod{under, over}
	h.clock.Step(10 * time.Second)
	if got := h.sync(t); names(got) != "over" || h.kills[1].grace != 3 {
		t.Fatalf("soft: evicted %v grace %d, want over with its own grace 3 (< max 30)", names(got), h.kills[1].grace)
	}
	want := "The node was low on resource: ephemeral-storage. Threshold quantity: 2Gi, available: 1536Mi. Container c was using 220Mi, request is 100Mi, has larger consumption of ephemeral-storage. "
	if h.kills[1].status.Message != want {
		t.Errorf("message\n%q\nwant\n%q", h.kills[1].status.Message, want)
	}
	h.pods = []*v1.Pod{under}
	h.clock.Step(10 * time.Second)
	h.stats.s = diskSummary(512, root, logs)
	if got := h.sync(t); names(got) != "under" || h.kills[2].grace != 1 {
		t.Fatalf("hard: evicted %v grace %d", names(got), h.kills[2].grace)
	}
}

// TestInodePressureFsInodes (kubelet TestInodePressureFsInodes): the pod
// using the most inodes is evicted under nodefs.inodesFree.
func TestInodePressureFsInodes(t *testing.T) {
	ts := mustParse(t, map[string]string{"nodefs.inodesFree": "1Mi"}, nil, nil, nil)
	h := newHarness(t, ts, []*v1.Pod{mkPod("few", 0, "", ""), mkPod("many", 0, "", ""), mkPod("none", 0, "", "")}, Config{})
	h.stats.s = &Summary{
		NodeFs: &FsStats{AvailableBytes: mi(8000), CapacityBytes: mi(10000), InodesFree: 2 << 20, Inodes: 4 << 20},
		Pods: []PodStats{{UID: "few", RootfsInodes: 10}, {UID: "many", RootfsInodes: 900, LogsInodes: 5, VolumeInodes: 100},
			{UID: "none"}},
	}
	if h.sync(t) != nil || h.m.IsUnderDiskPressure() {
		t.Fatal("no inode pressure expected")
	}
	h.clock.Step(10 * time.Second)
	h.stats.s.NodeFs.InodesFree = 512 << 10
	if got := h.sync(t); names(got) != "many" || !h.m.IsUnderDiskPressure() {
		t.Fatalf("evicted %v, want many", names(got))
	}
	if msg := h.kills[0].status.Message; msg != "The node was low on resource: inodes. Threshold quantity: 1Mi, available: 524288. " {
		t.Errorf("message %q", msg)
	}
}

// TestPercentageThresholdsMet (kubelet TestPercentageThresholdsMet): a
// percentage is of the signal's capacity (available + working set), and
// min reclaim is a percentage of capacity too. (Exactly at the boundary
// the float32 rounding of percentages, as the kubelet's, decides.)
func TestPercentageThresholdsMet(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "10%"}, nil, nil, map[string]string{"memory.available": "5%"})
	at := func(availMi uint64) map[Signal]observation {
		return observe(&Summary{Memory: &MemoryStats{AvailableBytes: mi(availMi), WorkingSetBytes: mi(1000 - availMi)}})
	}
	for _, c := range []struct {
		avail      uint64
		minReclaim bool
		want       bool
	}{{90, false, true}, {99, false, true}, {101, false, false}, {110, false, false}, {149, true, true}, {151, true, false}} {
		if got := len(met(ts, at(c.avail), c.minReclaim)) == 1; got != c.want {
			t.Errorf("available %dMi of 1000Mi (min reclaim %v): met = %v, want %v", c.avail, c.minReclaim, got, c.want)
		}
	}
}

// TestRankDisk (kubelet TestOrderedByExceedsRequestDisk,
// TestOrderedByPriorityDisk, TestOrderedbyDisk): no stats first, then over
// the ephemeral-storage request, then lower priority, then usage above
// request; every kind of use (layers, logs, volumes) counts on a shared fs.
func TestRankDisk(t *testing.T) {
	pods := []*v1.Pod{
		withEphemeral(mkPod("under-request", 0, "", ""), "2Gi"),
		withEphemeral(mkPod("high-over", 100, "", ""), "100Mi"),
		withEphemeral(mkPod("low-over-small", 0, "", ""), "100Mi"),
		mkPod("low-over-big", 0, "", ""),
		mkPod("no-stats", 1000, "", ""),
	}
	stats := map[types.UID]*PodStats{
		"under-request":  {RootfsBytes: mi(1000)},
		"high-over":      {RootfsBytes: mi(900)},
		"low-over-small": {RootfsBytes: mi(100), LogsBytes: mi(50)},
		"low-over-big":   {VolumeBytes: mi(300)},
	}
	rank(pods, SignalNodeFsAvailable, stats, false)
	if got := names(pods); got != "no-stats,low-over-big,low-over-small,high-over,under-request" {
		t.Fatalf("order %s", got)
	}
}

// TestRankInodes (kubelet TestOrderedbyInodes, TestOrderedByPriorityInodes):
// inodes have no request; lower priority, then more inodes.
func TestRankInodes(t *testing.T) {
	pods := []*v1.Pod{mkPod("high-many", 10, "", ""), mkPod("low-few", 0, "", ""), mkPod("low-many", 0, "", ""), mkPod("low-zero", 0, "", "")}
	stats := map[types.UID]*PodStats{
		"high-many": {RootfsInodes: 1000},
		"low-few":   {LogsInodes: 10},
		"low-many":  {RootfsInodes: 100, VolumeInodes: 100},
		"low-zero":  {},
	}
	rank(pods, SignalNodeFsInodesFree, stats, false)
	if got := names(pods); got != "low-many,low-few,high-many,low-zero" {
		t.Fatalf("order %s", got)
	}
}

// TestRankMemoryPriority (kubelet TestOrderedByPriorityMemory,
// TestOrderedByMemory): among pods over their requests, priority beats
// size; at equal priority, more usage above request goes first.
func TestRankMemoryPriority(t *testing.T) {
	pods := []*v1.Pod{mkPod("high-huge", 10, "", ""), mkPod("low-small", 0, "", ""), mkPod("low-big", 0, "", "")}
	stats := map[types.UID]*PodStats{
		"high-huge": {MemoryWorkingSetBytes: mi(4000)},
		"low-small": {MemoryWorkingSetBytes: mi(10)},
		"low-big":   {MemoryWorkingSetBytes: mi(500)},
	}
	rank(pods, SignalMemoryAvailable, stats, false)
	if got := names(pods); got != "low-big,low-small,high-huge" {
		t.Fatalf("order %s", got)
	}
}

// Disk reclaim with a dedicated image file system (kubelet
// buildSignalToNodeReclaimFuncs): imagefs pressure runs container then
// image GC first; nodefs pressure (logs and volumes) has nothing to reclaim
// at node level and evicts at once.
func TestNodeReclaimDedicatedImageFs(t *testing.T) {
	for _, c := range []struct {
		signal, victim string
		wantGC         string
	}{
		{"imagefs.available", "layers", "containers,images"},
		{"nodefs.available", "logs", ""},
	} {
		t.Run(c.signal, func(t *testing.T) {
			ts := mustParse(t, map[string]string{c.signal: "1Gi"}, nil, nil, nil)
			h := newHarness(t, ts, []*v1.Pod{mkPod("layers", 0, "", ""), mkPod("logs", 0, "", "")}, Config{})
			var calls []string
			h.m.cfg.ContainerGC = fakeGC{&calls, "containers", func() {}, nil}
			h.m.cfg.ImageGC = fakeGC{&calls, "images", func() {}, nil}
			h.stats.s = &Summary{
				NodeFs:  &FsStats{AvailableBytes: mi(500), CapacityBytes: mi(10000), InodesFree: 10, Inodes: 10},
				ImageFs: &FsStats{AvailableBytes: mi(500), CapacityBytes: mi(10000), InodesFree: 10, Inodes: 10},
				Pods:    []PodStats{{UID: "layers", RootfsBytes: mi(900)}, {UID: "logs", LogsBytes: mi(100)}},
			}
			if got := h.sync(t); names(got) != c.victim {
				t.Errorf("evicted %v, want %s", names(got), c.victim)
			}
			if strings.Join(calls, ",") != c.wantGC {
				t.Errorf("GC calls %v, want %q", calls, c.wantGC)
			}
		})
	}
}

// Memory signals act before disk ones in the same cycle, and a cycle
// evicts one pod only.
func TestMemoryBeforeDisk(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "1Gi", "nodefs.available": "1Gi"}, nil, nil, nil)
	h := newHarness(t, ts, []*v1.Pod{mkPod("disk-hog", 0, "", ""), mkPod("mem-hog", 0, "", "")}, Config{})
	h.stats.s = memSummary(100, map[string]uint64{"disk-hog": 10, "mem-hog": 900})
	h.stats.s.NodeFs = &FsStats{AvailableBytes: mi(100), CapacityBytes: mi(10000)}
	for i := range h.stats.s.Pods {
		if h.stats.s.Pods[i].UID == "disk-hog" {
			h.stats.s.Pods[i].RootfsBytes = mi(5000)
		}
	}
	got := h.sync(t)
	if names(got) != "mem-hog" || len(h.kills) != 1 {
		t.Fatalf("evicted %v (kills %d), want mem-hog alone", names(got), len(h.kills))
	}
	if !h.m.IsUnderMemoryPressure() || !h.m.IsUnderDiskPressure() {
		t.Fatalf("conditions %v", h.m.NodeConditions())
	}
}
