package apiserver

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

func newMirrorClient(t *testing.T, cfg MirrorClientConfig, objs ...*v1.Pod) (*MirrorClient, *fake.Clientset) {
	t.Helper()
	c := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: "node-uid"}})
	for _, o := range objs {
		if err := c.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Client, cfg.NodeName = c, nodeName
	m, err := NewMirrorClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, c
}

func TestNewMirrorClientConfig(t *testing.T) {
	c := fake.NewClientset()
	for _, cfg := range []MirrorClientConfig{{NodeName: "n"}, {Client: c}, {Client: c, NodeName: "n", Period: -1}} {
		if _, err := NewMirrorClient(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
}

func TestMirrorClientCreatesMirror(t *testing.T) {
	m, c := newMirrorClient(t, MirrorClientConfig{})
	static := staticPod("etcd", "h1")
	static.Spec.NodeName = ""
	static.Labels = map[string]string{"app": "etcd"}
	if err := m.SyncMirrorPods(t.Context(), []*v1.Pod{static, apiPod("web", "u1")}); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "create")); n != 1 {
		t.Fatalf("creates = %d, want 1 (the API pod needs no mirror)", n)
	}
	got := getPod(t, c, "etcd")
	if got.Annotations[kubetypes.ConfigMirrorAnnotation] != "h1" || got.Labels["app"] != "etcd" {
		t.Fatalf("mirror meta = %+v", got.ObjectMeta)
	}
	if got.Spec.NodeName != nodeName || len(got.Spec.Containers) != 1 {
		t.Fatalf("mirror spec = %+v", got.Spec)
	}
	refs := got.OwnerReferences
	if len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != nodeName || refs[0].UID != "node-uid" || refs[0].APIVersion != "v1" || refs[0].Controller == nil || !*refs[0].Controller || refs[0].BlockOwnerDeletion != nil {
		t.Fatalf("owner references = %+v", refs)
	}
	if static.Annotations[kubetypes.ConfigMirrorAnnotation] != "" {
		t.Fatal("the static pod was modified")
	}
	// In sync: nothing more happens.
	if err := m.SyncMirrorPods(t.Context(), []*v1.Pod{static}); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "create")) + len(actionsOf(c, "delete")); n != 1 {
		t.Fatalf("writes = %d, want 1", n)
	}
}

func TestMirrorClientRecreatesStaleAndDeletesOrphans(t *testing.T) {
	stale := MirrorPod(staticPod("etcd", "h0"), nodeName, "node-uid")
	stale.UID = "m0"
	orphan := MirrorPod(staticPod("old", "h9"), nodeName, "node-uid")
	orphan.UID = "m9"
	regular := apiPod("web", "u1")
	m, c := newMirrorClient(t, MirrorClientConfig{}, stale, orphan, regular)
	if err := m.SyncMirrorPods(t.Context(), []*v1.Pod{staticPod("etcd", "h1")}); err != nil {
		t.Fatal(err)
	}
	if got := getPod(t, c, "etcd").Annotations[kubetypes.ConfigMirrorAnnotation]; got != "h1" {
		t.Fatalf("mirror hash = %q, want h1", got)
	}
	if _, err := c.CoreV1().Pods("default").Get(t.Context(), "old", metav1.GetOptions{}); err == nil {
		t.Fatal("orphaned mirror pod not deleted")
	}
	getPod(t, c, "web") // a regular pod is left alone
	if n := len(actionsOf(c, "delete")); n != 2 {
		t.Fatalf("deletes = %d, want 2", n)
	}
}

func TestMirrorClientRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		var mu sync.Mutex
		pods := []*v1.Pod{staticPod("a", "h1")}
		m, c := newMirrorClient(t, MirrorClientConfig{Clock: clk, Period: time.Second, StaticPods: func() []*v1.Pod {
			mu.Lock()
			defer mu.Unlock()
			return pods
		}})
		exists := func(name string) bool {
			_, err := c.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
			return err == nil
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if !exists("a") {
			t.Fatal("first sync did not create mirror a")
		}
		mu.Lock()
		pods = append(pods, staticPod("b", "h2"))
		mu.Unlock()
		clk.Step(500 * time.Millisecond)
		synctest.Wait()
		if exists("b") {
			t.Fatal("synced before the period")
		}
		clk.Step(500 * time.Millisecond)
		synctest.Wait()
		if !exists("b") {
			t.Fatal("periodic sync did not create mirror b")
		}
		if err := m.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Fatalf("second Run: err = %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestMirrorClientRunKeepsMirrorsUntilSourcesReady: after a restart the
// mirror pods are in the API server before the file source has listed the
// static pods. Run deletes no mirror while the sources are not all ready,
// keeps the mirror of an unchanged static pod (same object, same UID) once
// they are, recreates only the changed one and deletes only the true orphan.
func TestMirrorClientRunKeepsMirrorsUntilSourcesReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
		kept := MirrorPod(staticPod("kept", "h1"), nodeName, "node-uid")
		kept.UID = "m-kept"
		changed := MirrorPod(staticPod("changed", "h2"), nodeName, "node-uid")
		changed.UID = "m-changed"
		orphan := MirrorPod(staticPod("orphan", "h3"), nodeName, "node-uid")
		orphan.UID = "m-orphan"
		var mu sync.Mutex
		var pods []*v1.Pod
		ready := false
		m, c := newMirrorClient(t, MirrorClientConfig{Clock: clk, Period: time.Second,
			StaticPods: func() []*v1.Pod {
				mu.Lock()
				defer mu.Unlock()
				return pods
			},
			SourcesReady: func() bool {
				mu.Lock()
				defer mu.Unlock()
				return ready
			},
		}, kept, changed, orphan, apiPod("web", "u1"))
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		// The restarted agent's sources have sent nothing yet.
		if n := len(actionsOf(c, "delete")) + len(actionsOf(c, "create")); n != 0 {
			t.Fatalf("%d deletes and creates before any source was ready, want none", n)
		}
		// The API source is ready, the file source has listed "kept" and
		// "changed" (its hash moved on), but not every source is ready.
		mu.Lock()
		pods = []*v1.Pod{staticPod("kept", "h1"), staticPod("changed", "h2b"), apiPod("web", "u1")}
		mu.Unlock()
		clk.Step(time.Second)
		synctest.Wait()
		if got := getPod(t, c, "orphan"); got.UID != "m-orphan" {
			t.Fatalf("orphan replaced before the sources were ready: %+v", got.ObjectMeta)
		}
		if got := getPod(t, c, "changed").Annotations[kubetypes.ConfigMirrorAnnotation]; got != "h2b" {
			t.Fatalf("changed static pod's mirror hash = %q, want h2b", got)
		}
		// Every source ready: the orphan goes.
		mu.Lock()
		ready = true
		mu.Unlock()
		clk.Step(time.Second)
		synctest.Wait()
		if _, err := c.CoreV1().Pods("default").Get(t.Context(), "orphan", metav1.GetOptions{}); err == nil {
			t.Fatal("orphaned mirror pod not deleted once the sources were ready")
		}
		if got := getPod(t, c, "kept"); got.UID != "m-kept" {
			t.Fatalf("unchanged static pod's mirror replaced: UID %q, want m-kept", got.UID)
		}
		var deleted []string
		for _, a := range actionsOf(c, "delete") {
			deleted = append(deleted, a.(clienttesting.DeleteActionImpl).Name)
		}
		if len(deleted) != 2 || !slices.Contains(deleted, "changed") || !slices.Contains(deleted, "orphan") {
			t.Fatalf("deleted %v, want the changed and the orphaned mirror only", deleted)
		}
		if n := len(actionsOf(c, "create")); n != 1 {
			t.Fatalf("creates = %d, want 1 (the changed mirror)", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestMirrorClientReplacesMirrorBeingDeleted(t *testing.T) {
	mirror := MirrorPod(staticPod("etcd", "h1"), nodeName, "node-uid")
	mirror.UID = "m1"
	now := metav1.Now()
	mirror.DeletionTimestamp = &now
	m, c := newMirrorClient(t, MirrorClientConfig{}, mirror)
	if err := m.SyncMirrorPods(t.Context(), []*v1.Pod{staticPod("etcd", "h1")}); err != nil {
		t.Fatal(err)
	}
	dels := actionsOf(c, "delete")
	if len(dels) != 1 {
		t.Fatalf("deletes = %d, want 1", len(dels))
	}
	opts := dels[0].(clienttesting.DeleteActionImpl).DeleteOptions
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 || opts.Preconditions == nil || *opts.Preconditions.UID != "m1" {
		t.Fatalf("delete options = %+v", opts)
	}
	if got := getPod(t, c, "etcd"); got.DeletionTimestamp != nil {
		t.Fatal("mirror not created again")
	}
}
