package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/nodestatus"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const nodeName = "node-1"

func initialNode() *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
			v1.LabelHostname: "host-1", v1.LabelOSStable: "linux", v1.LabelArchStable: "amd64", "team": "ours",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), "hugepages-2Mi": resource.MustParse("1Gi")},
			Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), "hugepages-2Mi": resource.MustParse("1Gi")},
		},
	}
}

func newSink(t *testing.T, client *fake.Clientset) *Sink {
	t.Helper()
	s, err := NewSink(SinkConfig{Client: client, NodeName: nodeName})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func verbs(client *fake.Clientset, resource string) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == resource {
			v := a.GetVerb()
			if a.GetSubresource() != "" {
				v += "/" + a.GetSubresource()
			}
			out = append(out, v)
		}
	}
	return out
}

func TestRegisterCreates(t *testing.T) {
	client := fake.NewClientset()
	s := newSink(t, client)
	got, err := s.Register(t.Context(), initialNode())
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != nodeName || len(got.Spec.Taints) != 1 {
		t.Errorf("registered %+v", got)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "create" {
		t.Errorf("actions = %s", v)
	}
	// The cache now serves the first try of an update.
	client.ClearActions()
	if _, err := s.Get(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if v := verbs(client, "nodes"); len(v) != 0 {
		t.Errorf("cached Get made calls: %v", v)
	}
	if _, err := s.Get(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "get" {
		t.Errorf("fresh Get actions = %s", v)
	}
}

func TestRegisterExistingReconciles(t *testing.T) {
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{
			v1.LabelHostname: "old-host", v1.LabelOSStable: "linux", "admin": "label",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "admin-taint", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Capacity:    v1.ResourceList{"hugepages-1Gi": resource.MustParse("2Gi")},
			Allocatable: v1.ResourceList{"hugepages-1Gi": resource.MustParse("2Gi")},
		},
	}
	client := fake.NewClientset(existing)
	s := newSink(t, client)
	got, err := s.Register(t.Context(), initialNode())
	if err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "create,get,patch/status" {
		t.Errorf("actions = %s", v)
	}
	if got.Labels[v1.LabelHostname] != "host-1" || got.Labels[v1.LabelArchStable] != "amd64" || got.Labels["admin"] != "label" {
		t.Errorf("labels = %v", got.Labels)
	}
	if _, ok := got.Labels["team"]; ok {
		t.Errorf("a non-default label of the initial node was added to the existing node: %v", got.Labels)
	}
	if _, ok := got.Status.Capacity["hugepages-1Gi"]; ok {
		t.Errorf("stale huge page size kept: %v", got.Status.Capacity)
	}
	if c := got.Status.Capacity["hugepages-2Mi"]; c.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("huge page capacity = %v", got.Status.Capacity)
	}
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "admin-taint" {
		t.Errorf("taints changed: %v", got.Spec.Taints)
	}

	// Registering again with nothing to reconcile does not patch.
	client.ClearActions()
	if _, err := newSink(t, client).Register(t.Context(), initialNode()); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "create,get" {
		t.Errorf("second registration actions = %s", v)
	}
}

func TestRegisterErrors(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	t.Run("forbidden create, node exists", func(t *testing.T) {
		client := fake.NewClientset(initialNode())
		client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gr, nodeName, errors.New("no"))
		})
		if _, err := newSink(t, client).Register(t.Context(), initialNode()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("forbidden create, node missing", func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(gr, nodeName, errors.New("no"))
		})
		if _, err := newSink(t, client).Register(t.Context(), initialNode()); !apierrors.IsForbidden(err) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServerTimeout(gr, "create", 1)
		})
		if _, err := newSink(t, client).Register(t.Context(), initialNode()); err == nil {
			t.Fatal("no error")
		}
		if v := strings.Join(verbs(client, "nodes"), ","); v != "create" {
			t.Errorf("actions = %s", v)
		}
	})
	t.Run("wrong node", func(t *testing.T) {
		n := initialNode()
		n.Name = "other"
		if _, err := newSink(t, fake.NewClientset()).Register(t.Context(), n); !errors.Is(err, ErrWrongNode) {
			t.Fatalf("err = %v", err)
		}
	})
	if _, err := NewSink(SinkConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewSink: %v", err)
	}
}

func TestStatusPatchAddresses(t *testing.T) {
	orig := initialNode()
	orig.Status.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "fd00::1"}, {Type: v1.NodeHostName, Address: "h"},
	}
	node := orig.DeepCopy()
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeHostName, Address: "h"}}
	node.Spec.Unschedulable = true // never sent
	patch, err := StatusPatch(orig, node)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(patch), "unschedulable") {
		t.Errorf("patch carries the spec: %s", patch)
	}
	origJSON, _ := json.Marshal(orig)
	merged, err := strategicpatch.StrategicMergePatch(origJSON, patch, v1.Node{})
	if err != nil {
		t.Fatal(err)
	}
	var got v1.Node
	if err := json.Unmarshal(merged, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Addresses) != 2 || got.Status.Addresses[0].Address != "10.0.0.2" {
		t.Errorf("addresses after patch = %v (patch %s)", got.Status.Addresses, patch)
	}
}

// controllerOnFake wires a nodestatus.Controller to a Sink on a fake
// clientset.
func controllerOnFake(t *testing.T, client *fake.Clientset, clk *clocktesting.FakeClock, failures *int) *nodestatus.Controller {
	t.Helper()
	setters := nodestatus.DefaultSetters(nodestatus.SettersConfig{
		Clock:   clk,
		Address: nodestatus.AddressConfig{Hostname: "10.0.0.9"},
		Machine: nodestatus.MachineInfoConfig{Machine: func(context.Context) (*nodestatus.Machine, error) {
			return &nodestatus.Machine{NumCores: 2, MemoryCapacity: 4 << 30}, nil
		}},
	})
	c, err := nodestatus.New(nodestatus.Config{
		NodeName: nodeName, Sink: newSink(t, client), Setters: setters, Clock: clk,
		Rand:                       func() float64 { return 0.5 },
		OnRepeatedHeartbeatFailure: func() { *failures++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUpdateNodeStatusWithLease: like the kubelet's test, with the lease
// carrying liveness, a status whose only change is heartbeats is not
// patched; after the report period it is; a change is patched at once.
func TestUpdateNodeStatusWithLease(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	var failures int
	c := controllerOnFake(t, client, clk, &failures)
	ctx := t.Context()
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "create,patch/status" {
		t.Fatalf("first sync actions = %s", v)
	}
	client.ClearActions()
	clk.Step(nodestatus.DefaultUpdateFrequency)
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if v := verbs(client, "nodes"); len(v) != 0 {
		t.Fatalf("heartbeat-only update made calls: %v", v)
	}
	clk.Step(nodestatus.DefaultReportFrequency)
	if err := c.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "nodes"), ","); v != "patch/status" {
		t.Fatalf("report-period actions = %s", v)
	}
	stored, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range stored.Status.Conditions {
		if !cond.LastHeartbeatTime.Time.Equal(clk.Now()) {
			t.Errorf("%s heartbeat %v, want %v", cond.Type, cond.LastHeartbeatTime, clk.Now())
		}
	}
	if failures != 0 {
		t.Errorf("%d failure callbacks", failures)
	}
}

// TestUpdateExistingNodeStatusTimeout: like the kubelet's test, a server
// that never answers gets 5 tries (the first on the cache, 4 GETs) and 4
// repeated-failure callbacks.
func TestUpdateExistingNodeStatusTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	client := fake.NewClientset()
	var failures int
	c := controllerOnFake(t, client, clk, &failures)
	ctx := t.Context()
	if err := c.Register(ctx); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	gr := schema.GroupResource{Resource: "nodes"}
	client.PrependReactor("patch", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServerTimeout(gr, "patch", 1)
	})
	err := c.SyncOnce(ctx)
	if !errors.Is(err, nodestatus.ErrUpdateRetries) {
		t.Fatalf("err = %v", err)
	}
	v := verbs(client, "nodes")
	patches, gets := 0, 0
	for _, verb := range v {
		switch verb {
		case "patch/status":
			patches++
		case "get":
			gets++
		}
	}
	if patches < 5 || gets != 4 {
		t.Errorf("actions %v: %d patches (want ≥5), %d gets (want 4)", v, patches, gets)
	}
	if failures < 4 {
		t.Errorf("%d repeated-failure callbacks, want ≥4", failures)
	}
}

// TestConstructorsReportEveryProblem: NewSink names every bad field at once.
func TestConstructorsReportEveryProblem(t *testing.T) {
	_, sinkErr := NewSink(SinkConfig{})
	for _, tc := range []struct {
		name  string
		err   error
		names []string
	}{
		{"NewSink", sinkErr, []string{"Client", "NodeName"}},
	} {
		if !errors.Is(tc.err, ErrInvalidConfig) {
			t.Errorf("%s = %v, want ErrInvalidConfig", tc.name, tc.err)
			continue
		}
		for _, n := range tc.names {
			if !strings.Contains(tc.err.Error(), n) {
				t.Errorf("%s = %v: %s not named", tc.name, tc.err, n)
			}
		}
	}
}
