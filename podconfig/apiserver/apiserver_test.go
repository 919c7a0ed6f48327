package apiserver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pod(ns, name, node, image string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

func names(u kubetypes.PodUpdate) string {
	var out []string
	for _, p := range u.Pods {
		out = append(out, p.Namespace+"/"+p.Name+"@"+p.Spec.Containers[0].Image)
	}
	return strings.Join(out, ",")
}

// start runs a Source on client and returns its Out and a stop function
// that cancels Run and waits for it to return.
func start(t *testing.T, client *fake.Clientset) (<-chan kubetypes.PodUpdate, func()) {
	t.Helper()
	out := make(chan kubetypes.PodUpdate)
	s, err := New(Config{Client: client, NodeName: "node1", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}
	t.Cleanup(stop)
	return out, stop
}

func next(t *testing.T, out <-chan kubetypes.PodUpdate) kubetypes.PodUpdate {
	t.Helper()
	select {
	case u := <-out:
		if u.Op != kubetypes.SET || u.Source != kubetypes.SourceAPI {
			t.Fatalf("update %v/%s, want SET/api", u.Op, u.Source)
		}
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update within 30s")
		return kubetypes.PodUpdate{}
	}
}

func TestInitialEmptyListSendsOneEmptySet(t *testing.T) {
	out, stop := start(t, fake.NewClientset())
	u := next(t, out)
	if u.Pods == nil || len(u.Pods) != 0 {
		t.Fatalf("first update %v, want an empty non-nil list", u.Pods)
	}
	stop()
	select {
	case u := <-out:
		t.Fatalf("second update %v", names(u))
	default:
	}
}

func TestAddUpdateDeleteSendFullSets(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset(pod("ns", "a", "node1", "img:1"), pod("ns", "other", "node2", "img:1"))
	out, _ := start(t, client)
	if got := names(next(t, out)); got != "ns/a@img:1" {
		t.Fatalf("initial set = %s (pods of other nodes must be filtered)", got)
	}
	pods := client.CoreV1().Pods("ns")

	if _, err := pods.Create(ctx, pod("ns", "b", "node1", "img:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out)); got != "ns/a@img:1,ns/b@img:1" {
		t.Fatalf("after add = %s", got)
	}

	// A pod of another node changes nothing and sends nothing: the next
	// update is the one caused by the update of b.
	if _, err := pods.Create(ctx, pod("ns", "c", "node2", "img:1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Update(ctx, pod("ns", "b", "node1", "img:2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out)); got != "ns/a@img:1,ns/b@img:2" {
		t.Fatalf("after update = %s", got)
	}

	if err := pods.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := names(next(t, out)); got != "ns/b@img:2" {
		t.Fatalf("after delete = %s", got)
	}
	if err := pods.Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := next(t, out); len(u.Pods) != 0 {
		t.Fatalf("after deleting all = %s", names(u))
	}
}

func TestListUsesNodeFieldSelector(t *testing.T) {
	client := fake.NewClientset()
	out, stop := start(t, client)
	next(t, out)
	stop()
	var sawList bool
	for _, a := range client.Actions() {
		var sel string
		switch a := a.(type) {
		case k8stesting.ListAction:
			sel = a.GetListRestrictions().Fields.String()
		case k8stesting.WatchAction:
			sel = a.GetWatchRestrictions().Fields.String()
		default:
			continue
		}
		if sel != "spec.nodeName=node1" {
			t.Errorf("%s %s with field selector %q", a.GetVerb(), a.GetResource().Resource, sel)
		}
		if a.GetVerb() == "list" {
			sawList = true
		}
	}
	if !sawList {
		t.Errorf("no list action")
	}
}

// Note for writers of tests: the fake clientset's watch replays objects
// created after the list's resource version but not deletions, so a test
// deletes only after it has seen an event that came through the watch.

// TestStopWhileOutFull: nobody reads Out; Run must still return on cancel.
func TestStopWhileOutFull(t *testing.T) {
	client := fake.NewClientset(pod("ns", "a", "node1", "img"))
	_, stop := start(t, client)
	stop()
}

func TestRunTwice(t *testing.T) {
	out := make(chan kubetypes.PodUpdate, 1)
	s, err := New(Config{Client: fake.NewClientset(), NodeName: "node1", Out: out})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-out // the first Run is up
	if err := s.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
		t.Fatalf("second Run = %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestNewConfigErrors(t *testing.T) {
	out := make(chan kubetypes.PodUpdate)
	c := fake.NewClientset()
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{NodeName: "n", Out: out}, "Client"},
		{Config{Client: c, Out: out}, "NodeName"},
		{Config{Client: c, NodeName: "n"}, "Out"},
		{Config{Client: c, NodeName: "n", Out: out, Resync: -1}, "Resync"},
	} {
		if _, err := New(tc.cfg); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("err = %v, want ErrInvalidConfig naming %s", err, tc.field)
		}
	}
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{Resync: -1, MaxRetryBackoff: -1})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"Client", "NodeName", "Out", "Resync", "MaxRetryBackoff"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}
