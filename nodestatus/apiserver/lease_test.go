package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func leaseNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, UID: types.UID("node-uid")}}
}

func newLease(t *testing.T, client *fake.Clientset, clk clock.Clock, onFailure func()) *LeaseController {
	t.Helper()
	l, err := NewLease(LeaseConfig{Client: client, NodeName: nodeName, Clock: clk, OnRepeatedHeartbeatFailure: onFailure,
		Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestLeaseCreateAndRenew(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	client := fake.NewClientset(leaseNode())
	l := newLease(t, client, clk, nil)
	ctx := t.Context()
	if err := l.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *lease.Spec.HolderIdentity != nodeName || *lease.Spec.LeaseDurationSeconds != 40 || !lease.Spec.RenewTime.Time.Equal(t0) {
		t.Errorf("lease spec = %+v", lease.Spec)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != "node-uid" || lease.OwnerReferences[0].Kind != "Node" {
		t.Errorf("owner = %+v", lease.OwnerReferences)
	}
	client.ClearActions()
	clk.Step(10 * time.Second)
	if err := l.SyncOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// Renewal is one update of the last lease: no get.
	if v := strings.Join(verbs(client, "leases"), ","); v != "update" {
		t.Errorf("renew actions = %s", v)
	}
	lease, _ = client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
	if !lease.Spec.RenewTime.Time.Equal(t0.Add(10 * time.Second)) {
		t.Errorf("renew time = %v", lease.Spec.RenewTime)
	}
	if l.Latest() == nil || !l.Latest().Spec.RenewTime.Time.Equal(t0.Add(10*time.Second)) {
		t.Errorf("Latest = %+v", l.Latest())
	}
}

func TestLeaseExistingIsUpdated(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	old := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: v1.NamespaceNodeLease}}
	client := fake.NewClientset(leaseNode(), old)
	if err := newLease(t, client, clk, nil).SyncOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if v := strings.Join(verbs(client, "leases"), ","); v != "get,update" {
		t.Errorf("actions = %s", v)
	}
}

// TestRetryUpdateNodeLease follows the kubelet lease controller's test of
// the same name.
func TestRetryUpdateNodeLease(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	timeout := apierrors.NewServerTimeout(gr, "put", 1)
	conflict := apierrors.NewConflict(gr, nodeName, fmt.Errorf("conflict"))
	base := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Namespace: v1.NamespaceNodeLease}}
	cases := []struct {
		name          string
		objects       []runtime.Object
		update        func(n int) error
		wantErr       bool
		wantFailures  int
		wantNoUpdates bool
	}{
		{name: "no errors", objects: []runtime.Object{leaseNode()}, update: func(int) error { return nil }},
		{name: "connection errors", objects: []runtime.Object{leaseNode()}, update: func(int) error { return timeout },
			wantErr: true, wantFailures: 4},
		{name: "optimistic lock errors", objects: []runtime.Object{leaseNode(), base.DeepCopy()},
			update: func(n int) error {
				switch n {
				case 1:
					return timeout
				case 2:
					return conflict
				}
				return nil
			}},
		{name: "node not found", update: func(int) error { return nil }, wantErr: true, wantFailures: 4, wantNoUpdates: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objects...)
			updates := 0
			client.PrependReactor("update", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
				updates++
				if err := tc.update(updates); err != nil {
					return true, nil, err
				}
				return true, a.(clienttesting.UpdateAction).GetObject(), nil
			})
			failures := 0
			l := newLease(t, client, clocktesting.NewFakeClock(time.Now()), func() { failures++ })
			l.mu.Lock()
			err := l.retryUpdate(t.Context(), base.DeepCopy())
			l.mu.Unlock()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrLeaseUpdate) {
				t.Errorf("err %v is not ErrLeaseUpdate", err)
			}
			if failures != tc.wantFailures {
				t.Errorf("%d failure callbacks, want %d", failures, tc.wantFailures)
			}
			if tc.wantNoUpdates && updates != 0 {
				t.Errorf("lease updated %d times without its node", updates)
			}
		})
	}
}

// TestLeaseRunBacksOff: while the node does not exist no lease is written
// and renewals back off (100ms doubling); once it exists the lease is
// created and then renewed every 10s.
func TestLeaseRunBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		l := newLease(t, client, clock.RealClock{}, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- l.Run(ctx) }()
		countGets := func() int {
			n := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "get" && a.GetResource().Resource == "leases" {
					n++
				}
			}
			return n
		}
		// Tries at 0, 200ms, 600ms, 1.4s, 3s (back-off 200ms, 400ms, 800ms, 1.6s).
		<-time.After(1500 * time.Millisecond)
		synctest.Wait()
		if n := countGets(); n != 4 {
			t.Fatalf("%d lease reads in 1.5s, want 4", n)
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, leaseNode(), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		<-time.After(1600 * time.Millisecond) // 3.1s: created
		synctest.Wait()
		lease, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease not created: %v", err)
		}
		created := lease.Spec.RenewTime.Time
		<-time.After(10 * time.Second)
		synctest.Wait()
		lease, _ = client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
		if got := lease.Spec.RenewTime.Time.Sub(created); got != 10*time.Second {
			t.Errorf("renewed %v after creation, want 10s", got)
		}
		if err := l.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run: %v", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func TestNewLeaseValidates(t *testing.T) {
	_, err := NewLease(LeaseConfig{DurationSeconds: -1})
	for _, f := range []string{"Client", "NodeName", "DurationSeconds"} {
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
	l, err := NewLease(LeaseConfig{Client: fake.NewClientset(), NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if l.cfg.RenewInterval != 10*time.Second || l.cfg.Namespace != "kube-node-lease" || l.cfg.Retries != 5 {
		t.Errorf("defaults = %+v", l.cfg)
	}
}
