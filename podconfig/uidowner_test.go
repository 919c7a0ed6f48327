package podconfig

import (
	"fmt"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// uidHolders returns namespace/name@source of every stored pod with uid.
func uidHolders(c *PodConfig, uid types.UID) []string {
	var out []string
	for _, p := range c.MergedState() {
		if p.UID == uid {
			out = append(out, p.Namespace+"/"+p.Name+"@"+p.Annotations[kubetypes.ConfigSourceAnnotation])
		}
	}
	return out
}

// One UID claimed by pods of two sources (issue 23, item 3): the first
// source keeps it; the other source's pod is refused, counted, and admitted
// once the owner lets the UID go. Also for incremental ops, and for a UID
// reused under another namespace/name within one source.
func TestUIDClaimedByTwoSourcesRefused(t *testing.T) {
	for _, op := range []kubetypes.Op{kubetypes.SET, kubetypes.ADD} {
		t.Run(op.String(), func(t *testing.T) {
			c, _ := newTestConfig(t, Incremental, kubetypes.SourceFile, kubetypes.SourcePush)
			c.Merge(kubetypes.SourceFile, set(mkPod("X", "file-pod")))
			c.Merge(kubetypes.SourcePush, kubetypes.PodUpdate{Op: op, Pods: []*v1.Pod{mkPod("X", "pushed-pod"), mkPod("Y", "other")}})
			if got := uidHolders(c, "X"); len(got) != 1 || got[0] != "ns/file-pod@file" {
				t.Fatalf("UID X held by %v, want only ns/file-pod@file", got)
			}
			if got := uidHolders(c, "Y"); len(got) != 1 {
				t.Fatalf("the pushed pod with a free UID was not kept: %v", got)
			}
			if n := c.Refused(); n != 1 {
				t.Fatalf("Refused() = %d, want 1", n)
			}
			// The owner lets go: the other source's pod is admitted on its next SET.
			c.Merge(kubetypes.SourceFile, set())
			c.Merge(kubetypes.SourcePush, set(mkPod("X", "pushed-pod"), mkPod("Y", "other")))
			if got := uidHolders(c, "X"); len(got) != 1 || got[0] != "ns/pushed-pod@push" {
				t.Fatalf("after the owner removed it, UID X held by %v, want ns/pushed-pod@push", got)
			}
		})
	}
	t.Run("same source, another name", func(t *testing.T) {
		c, _ := newTestConfig(t, Incremental, kubetypes.SourceAPI)
		c.Merge(kubetypes.SourceAPI, kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{mkPod("X", "a")}})
		c.Merge(kubetypes.SourceAPI, kubetypes.PodUpdate{Op: kubetypes.ADD, Pods: []*v1.Pod{mkPod("X", "b")}})
		if got := uidHolders(c, "X"); len(got) != 1 || got[0] != "ns/a@api" {
			t.Fatalf("UID X held by %v, want only ns/a@api", got)
		}
		if n := c.Refused(); n != 1 {
			t.Fatalf("Refused() = %d, want 1", n)
		}
	})
}

// Many sources sending overlapping UIDs never leave a UID with two holders.
func TestUIDOwnershipManySources(t *testing.T) {
	c, _ := newTestConfig(t, SnapshotAndUpdates)
	sources := []string{"a", "b", "c"}
	for round := range 30 {
		src := sources[round%3]
		var pods []*v1.Pod
		for i := range round % 5 {
			pods = append(pods, mkPod(fmt.Sprint("u", (round+i)%4), fmt.Sprint(src, "-", (round*7+i)%3)))
		}
		c.Merge(src, set(pods...))
		seen := map[types.UID]bool{}
		for _, p := range c.MergedState() {
			if seen[p.UID] {
				t.Fatalf("round %d: UID %s held twice: %v", round, p.UID, uidHolders(c, p.UID))
			}
			seen[p.UID] = true
		}
	}
}

// FuzzMergeReusedUIDs merges updates from three sources drawn from a small
// set of UIDs and names, so UIDs are claimed by several sources and reused
// under other names, and checks that no UID is ever stored twice and that
// the merge never panics.
func FuzzMergeReusedUIDs(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 1, 0, 1, 0, 2})
	f.Add([]byte{0, 1, 1, 1, 2, 1, 2, 3, 2, 0, 0, 0, 1, 0, 1})
	f.Add([]byte{5, 9, 3, 7, 11, 2, 4, 8, 1, 0, 3, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 3*256 {
			data = data[:3*256]
		}
		c, _ := newTestConfig(t, Incremental, "a", "b", "c")
		ops := []kubetypes.Op{kubetypes.SET, kubetypes.ADD, kubetypes.UPDATE, kubetypes.REMOVE, kubetypes.DELETE, kubetypes.RECONCILE}
		for i := 0; i+2 < len(data); i += 3 {
			src := string(rune('a' + data[i]%3))
			op := ops[int(data[i]/3)%len(ops)]
			var pods []*v1.Pod
			for j := range int(data[i+1]%4) + 1 {
				b := data[i+2] >> (2 * j)
				pods = append(pods, mkPod(fmt.Sprint("u", b%4), fmt.Sprint("p", (b/4)%3)))
			}
			c.Merge(src, kubetypes.PodUpdate{Op: op, Pods: pods})
			seen := map[types.UID]bool{}
			for _, p := range c.MergedState() {
				if seen[p.UID] {
					t.Fatalf("step %d: UID %s stored twice: %v", i/3, p.UID, uidHolders(c, p.UID))
				}
				seen[p.UID] = true
			}
			if len(c.owners) != len(seen) {
				t.Fatalf("step %d: %d owners for %d stored UIDs", i/3, len(c.owners), len(seen))
			}
		}
	})
}
