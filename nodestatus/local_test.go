package nodestatus

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

func TestLocalSink(t *testing.T) {
	dir := t.TempDir()
	var updates []*v1.Node
	l, err := NewLocal(LocalConfig{Dir: dir, OnUpdate: func(n *v1.Node) { updates = append(updates, n) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := l.Get(ctx, false); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("Get before Register: %v", err)
	}
	if _, err := l.PatchStatus(ctx, nil, &v1.Node{}); !errors.Is(err, ErrNotRegistered) {
		t.Fatalf("PatchStatus before Register: %v", err)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}},
		Status: v1.NodeStatus{Phase: v1.NodeRunning}}
	if _, err := l.Register(ctx, node); err != nil {
		t.Fatal(err)
	}
	node.Labels["a"] = "mutated by caller"
	got, _ := l.Get(ctx, true)
	if got.Labels["a"] != "1" {
		t.Fatal("sink kept the caller's node instead of a copy")
	}
	got.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue}}
	got.Spec.Unschedulable = true // not status: ignored
	if _, err := l.PatchStatus(ctx, nil, got); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !conditionTrue(back, v1.NodeReady) || back.Spec.Unschedulable || back.Name != "n" {
		t.Errorf("file holds %+v", back)
	}
	// Re-registering keeps the status, takes new labels.
	if _, err := l.Register(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"b": "2"}}}); err != nil {
		t.Fatal(err)
	}
	if n := l.Node(); !conditionTrue(n, v1.NodeReady) || n.Labels["b"] != "2" || n.Labels["a"] != "" {
		t.Errorf("after re-register: %+v", n)
	}
	if len(updates) != 3 {
		t.Errorf("%d updates, want 3", len(updates))
	}
	// A corrupt file is reported as such.
	if err := os.WriteFile(filepath.Join(dir, "node.json"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadLocal(dir, ""); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("corrupt file: %v", err)
	}
	if _, err := NewLocal(LocalConfig{Name: "../x"}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad name: %v", err)
	}
}

func TestStatusChanged(t *testing.T) {
	a := &v1.NodeStatus{Conditions: []v1.NodeCondition{
		{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Unix(1, 0)},
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: metav1.Unix(1, 0)},
	}}
	b := a.DeepCopy()
	b.Conditions[0].LastHeartbeatTime = metav1.Unix(100, 0)
	b.Conditions[0], b.Conditions[1] = b.Conditions[1], b.Conditions[0]
	if StatusChanged(a, b) {
		t.Error("heartbeat and order only counted as a change")
	}
	c := a.DeepCopy()
	c.Conditions[1].Status = v1.ConditionTrue
	if !StatusChanged(a, c) {
		t.Error("condition flip not a change")
	}
	d := a.DeepCopy()
	d.Images = []v1.ContainerImage{{Names: []string{"x"}}}
	if !StatusChanged(a, d) {
		t.Error("image change not a change")
	}
	e := a.DeepCopy()
	e.Conditions = e.Conditions[:1]
	if !StatusChanged(a, e) || !StatusChanged(a, nil) || StatusChanged(nil, nil) {
		t.Error("length/nil cases wrong")
	}
}
