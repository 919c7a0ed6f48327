package podconfig

import (
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
)

// rvPod is a pod as a source sends it: a fresh object each time.
func rvPod(rv, image string, phase v1.PodPhase) *v1.Pod {
	p := mkPod("a", "a")
	p.ResourceVersion = rv
	p.Spec.Containers[0].Image = image
	p.Status.Phase = phase
	return p
}

func storedRV(t *testing.T, c *PodConfig) string {
	t.Helper()
	pods := c.MergedState()
	if len(pods) != 1 {
		t.Fatalf("stored %d pods, want 1", len(pods))
	}
	return pods[0].ResourceVersion
}

func TestAPISourceResourceVersion(t *testing.T) {
	c, _ := newTestConfig(t, Incremental, kubetypes.SourceAPI)
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("1", "img:1", v1.PodPending))), "ADD(api):a")

	// The same object again: nothing.
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("1", "img:1", v1.PodPending))), "")

	// An equal resourceVersion is trusted: the content is not compared.
	// (The API server never sends different content under one version; this
	// pins that the comparison is skipped.)
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("1", "img:2", v1.PodRunning))), "")

	// A new version whose content is equal (e.g. a write of a field outside
	// both fingerprints): nothing delivered, but the stored version moves.
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("2", "img:1", v1.PodPending))), "")
	if rv := storedRV(t, c); rv != "2" {
		t.Errorf("stored resourceVersion = %q after an unchanged resend, want 2", rv)
	}

	// A new version with a status change: RECONCILE, carrying the new version.
	got := c.Merge(kubetypes.SourceAPI, set(rvPod("3", "img:1", v1.PodRunning)))
	expect(t, got, "RECONCILE(api):a")
	if len(got) == 1 && got[0].Pods[0].ResourceVersion != "3" {
		t.Errorf("reconciled pod resourceVersion = %q, want 3", got[0].Pods[0].ResourceVersion)
	}
	if rv := storedRV(t, c); rv != "3" {
		t.Errorf("stored resourceVersion = %q after a status-only change, want 3", rv)
	}
	// ... and its resend is unchanged.
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("3", "img:1", v1.PodRunning))), "")

	// A new version with a spec change: UPDATE.
	got = c.Merge(kubetypes.SourceAPI, set(rvPod("4", "img:2", v1.PodRunning)))
	expect(t, got, "UPDATE(api):a")
	if len(got) == 1 && (got[0].Pods[0].ResourceVersion != "4" || got[0].Pods[0].Spec.Containers[0].Image != "img:2") {
		t.Errorf("updated pod = rv %q image %q", got[0].Pods[0].ResourceVersion, got[0].Pods[0].Spec.Containers[0].Image)
	}
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("4", "img:2", v1.PodRunning))), "")

	// The incremental ops take the same shortcut.
	expect(t, c.Merge(kubetypes.SourceAPI, kubetypes.PodUpdate{Op: kubetypes.UPDATE, Pods: []*v1.Pod{rvPod("4", "img:2", v1.PodRunning)}}), "")
	expect(t, c.Merge(kubetypes.SourceAPI, kubetypes.PodUpdate{Op: kubetypes.UPDATE, Pods: []*v1.Pod{rvPod("5", "img:2", v1.PodSucceeded)}}), "RECONCILE(api):a")
}

func TestAPISourceEmptyResourceVersionIsCompared(t *testing.T) {
	c, _ := newTestConfig(t, Incremental, kubetypes.SourceAPI)
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("", "img:1", v1.PodPending))), "ADD(api):a")
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("", "img:1", v1.PodPending))), "")
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("", "img:1", v1.PodRunning))), "RECONCILE(api):a")
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("", "img:2", v1.PodRunning))), "UPDATE(api):a")
}

func TestAPISourceNewUIDSameResourceVersion(t *testing.T) {
	// A recreated pod (same name, new UID) is a new pod whatever its version.
	c, _ := newTestConfig(t, Incremental, kubetypes.SourceAPI)
	expect(t, c.Merge(kubetypes.SourceAPI, set(rvPod("1", "img:1", v1.PodPending))), "ADD(api):a")
	p := rvPod("1", "img:1", v1.PodPending)
	p.UID = "b"
	expect(t, c.Merge(kubetypes.SourceAPI, set(p)), "REMOVE(api):a ADD(api):b")
}

func TestFileSourceResourceVersionNotTrusted(t *testing.T) {
	for _, src := range []string{kubetypes.SourceFile, kubetypes.SourceHTTP, "test"} {
		t.Run(src, func(t *testing.T) {
			c, _ := newTestConfig(t, Incremental, src)
			expect(t, c.Merge(src, set(rvPod("1", "img:1", v1.PodPending))), "ADD("+src+"):a")
			expect(t, c.Merge(src, set(rvPod("1", "img:1", v1.PodPending))), "")
			expect(t, c.Merge(src, set(rvPod("1", "img:1", v1.PodRunning))), "RECONCILE("+src+"):a")
			expect(t, c.Merge(src, set(rvPod("1", "img:2", v1.PodRunning))), "UPDATE("+src+"):a")
		})
	}
}
