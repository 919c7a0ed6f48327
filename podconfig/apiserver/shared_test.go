package apiserver

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

// startShared runs a Shared watch on client; it stops with the test.
func startShared(t *testing.T, client *fake.Clientset) *Shared {
	t.Helper()
	s, err := NewShared(SharedConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Shared.Run = %v", err)
		}
	})
	return s
}

// startNode runs the source of node on s; it returns its Out and a stop
// function that returns Run's result.
func startNode(t *testing.T, s *Shared, node string) (<-chan kubetypes.PodUpdate, func() error) {
	t.Helper()
	out := make(chan kubetypes.PodUpdate)
	src, err := s.Source(node, out)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx) }()
	var result error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			result = <-done
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return out, stop
}

func TestSharedSendsEachNodeItsOwnPods(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset(pod("ns", "a", "node1", "img:1"), pod("ns", "b", "node2", "img:1"),
		pod("ns", "pending", "", "img:1"))
	s := startShared(t, client)
	out1, _ := startNode(t, s, "node1")
	out2, _ := startNode(t, s, "node2")
	if got := names(next(t, out1)); got != "ns/a@img:1" {
		t.Fatalf("node1 initial set = %s", got)
	}
	if got := names(next(t, out2)); got != "ns/b@img:1" {
		t.Fatalf("node2 initial set = %s", got)
	}
	pods := client.CoreV1().Pods("ns")
	// A change to node1's pods is sent to node1 only: node2's next set is
	// the one its own new pod causes.
	if _, err := pods.Create(ctx, pod("ns", "c", "node1", "img:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out1)); got != "ns/a@img:1,ns/c@img:1" {
		t.Fatalf("node1 after add = %s", got)
	}
	if _, err := pods.Create(ctx, pod("ns", "d", "node2", "img:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out2)); got != "ns/b@img:1,ns/d@img:1" {
		t.Fatalf("node2 after add = %s", got)
	}
	if _, err := pods.Update(ctx, pod("ns", "c", "node1", "img:2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out1)); got != "ns/a@img:1,ns/c@img:2" {
		t.Fatalf("node1 after update = %s", got)
	}
	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out1)); got != "ns/c@img:2" {
		t.Fatalf("node1 after delete = %s", got)
	}
	if got := names(kubetypes.PodUpdate{Pods: s.Pods("node2")}); got != "ns/b@img:1,ns/d@img:1" {
		t.Fatalf("Pods(node2) = %s", got)
	}
	n := 0
	s.Each(func(string, *v1.Pod) { n++ })
	if n != 3 {
		t.Fatalf("Each saw %d pods, want 3 (the unbound pod is not kept)", n)
	}
}

// TestSharedNodeStartedLaterGetsItsPods: pods bound while a node's source
// did not run are sent when it starts; a second source of a running node
// is refused; after the first stops, a new one may run.
func TestSharedNodeStartedLaterGetsItsPods(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	s := startShared(t, client)
	out1, stop1 := startNode(t, s, "node1")
	if u := next(t, out1); len(u.Pods) != 0 {
		t.Fatalf("initial set = %s, want empty", names(u))
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod("ns", "x", "node3", "img"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod("ns", "y", "node1", "img"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out1)); got != "ns/y@img" {
		t.Fatalf("node1 = %s", got)
	}
	// node3's pod came before node1's: it is stored by now.
	out3, _ := startNode(t, s, "node3")
	if got := names(next(t, out3)); got != "ns/x@img" {
		t.Fatalf("node3 started later = %s", got)
	}
	_, stopDup := startNode(t, s, "node1")
	if err := stopDup(); !errors.Is(err, ErrNodeWatched) {
		t.Fatalf("second source of node1 = %v, want ErrNodeWatched", err)
	}
	if err := stop1(); err != nil {
		t.Fatalf("node1 Run = %v", err)
	}
	out1b, _ := startNode(t, s, "node1")
	if got := names(next(t, out1b)); got != "ns/y@img" {
		t.Fatalf("node1 restarted = %s", got)
	}
}

// TestSharedCoalescesChanges: a node that does not read gets one SET with
// the latest pods, and the watch of other nodes goes on meanwhile.
func TestSharedCoalescesChanges(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	s := startShared(t, client)
	slow, _ := startNode(t, s, "slow")
	fast, _ := startNode(t, s, "fast")
	next(t, slow)
	next(t, fast)
	pods := client.CoreV1().Pods("ns")
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		if _, err := pods.Create(ctx, pod("ns", name, "slow", "img"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pods.Create(ctx, pod("ns", "f", "fast", "img"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, fast)); got != "ns/f@img" {
		t.Fatalf("fast = %s", got)
	}
	// The slow node's pods were stored before fast's; at most two SETs
	// (one possibly begun before the last changes) reach the full list.
	for i := 0; ; i++ {
		got := names(next(t, slow))
		if got == "ns/p1@img,ns/p2@img,ns/p3@img,ns/p4@img" {
			break
		}
		if i == 1 {
			t.Fatalf("slow's second set = %s, want all four pods", got)
		}
	}
}

func TestSharedListsWithFieldSelector(t *testing.T) {
	client := fake.NewClientset()
	s := startShared(t, client)
	out, _ := startNode(t, s, "n")
	next(t, out)
	var sawList bool
	for _, a := range client.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok {
			sawList = true
			if sel := l.GetListRestrictions().Fields.String(); sel != "spec.nodeName!=" {
				t.Errorf("list with field selector %q", sel)
			}
		}
	}
	if !sawList {
		t.Error("no list action")
	}
}

func TestSharedConfigErrors(t *testing.T) {
	_, err := NewShared(SharedConfig{MaxRetryBackoff: -1, FieldSelector: "a=b=c=("})
	for _, name := range []string{"Client", "MaxRetryBackoff", "FieldSelector"} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("NewShared = %v: want ErrInvalidConfig naming %s", err, name)
		}
	}
	s, err := NewShared(SharedConfig{Client: fake.NewClientset()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Source("", nil); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "nodeName") ||
		!strings.Contains(err.Error(), "out") {
		t.Errorf("Source(\"\", nil) = %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if err := s.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run = %v", err)
	}
}
