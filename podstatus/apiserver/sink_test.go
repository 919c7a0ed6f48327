package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/nodekit/nodekit/kubetypes"
)

func apiPod(name string, uid types.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid,
			Annotations: map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceAPI}},
		Spec:   v1.PodSpec{NodeName: nodeName, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPending},
	}
}

func staticPod(name, hash string) *v1.Pod {
	p := apiPod(name, types.UID("static-"+hash))
	p.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: kubetypes.SourceFile, kubetypes.ConfigHashAnnotation: hash}
	return p
}

func actionsOf(c *fake.Clientset, verb string) []clienttesting.Action {
	var out []clienttesting.Action
	for _, a := range c.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "pods" {
			out = append(out, a)
		}
	}
	return out
}

func newPodSink(t *testing.T, objs ...*v1.Pod) (*PodStatusSink, *fake.Clientset) {
	t.Helper()
	c := fake.NewClientset()
	for _, o := range objs {
		if err := c.Tracker().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewPodStatusSink(PodStatusSinkConfig{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func getPod(t *testing.T, c *fake.Clientset, name string) *v1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewPodStatusSinkConfig(t *testing.T) {
	if _, err := NewPodStatusSink(PodStatusSinkConfig{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
	if _, err := NewPodStatusSink(PodStatusSinkConfig{Client: fake.NewClientset(), MaxCachedStatuses: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v, want ErrInvalidConfig", err)
	}
}

func TestPodStatusSinkPatchesOnlyChanges(t *testing.T) {
	pod := apiPod("web", "u1")
	s, c := newPodSink(t, pod)
	ctx := t.Context()
	running := v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.1"}
	if err := s.SyncPodStatus(ctx, pod, running); err != nil {
		t.Fatal(err)
	}
	patches := actionsOf(c, "patch")
	if len(patches) != 1 {
		t.Fatalf("patches = %d, want 1", len(patches))
	}
	pa := patches[0].(clienttesting.PatchAction)
	if pa.GetSubresource() != "status" || pa.GetPatchType() != types.StrategicMergePatchType {
		t.Fatalf("patch subresource %q type %q", pa.GetSubresource(), pa.GetPatchType())
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(pa.GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body["metadata"]["uid"] != "u1" {
		t.Fatalf("patch %s has no UID precondition", pa.GetPatch())
	}
	if _, ok := body["spec"]; ok {
		t.Fatalf("patch %s touches the spec", pa.GetPatch())
	}
	if got := getPod(t, c, "web").Status; got.Phase != v1.PodRunning || got.PodIP != "10.0.0.1" {
		t.Fatalf("API status = %+v", got)
	}
	// Same status again: nothing sent, not even a read.
	before := len(c.Actions())
	if err := s.SyncPodStatus(ctx, pod, running); err != nil {
		t.Fatal(err)
	}
	if len(c.Actions()) != before {
		t.Fatalf("unchanged status caused %v", c.Actions()[before:])
	}
	// A change is sent.
	running.PodIP = "10.0.0.2"
	if err := s.SyncPodStatus(ctx, pod, running); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "patch")); n != 2 {
		t.Fatalf("patches = %d, want 2", n)
	}
	if got := getPod(t, c, "web").Status.PodIP; got != "10.0.0.2" {
		t.Fatalf("PodIP = %q", got)
	}
}

func TestPodStatusSinkSkipsGoneOrReplacedPods(t *testing.T) {
	pod := apiPod("web", "u1")
	s, c := newPodSink(t, apiPod("web", "u2"))
	if err := s.SyncPodStatus(t.Context(), pod, v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncPodStatus(t.Context(), apiPod("gone", "u3"), v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "patch")); n != 0 {
		t.Fatalf("patches = %d, want 0", n)
	}
	if got := getPod(t, c, "web").Status.Phase; got != v1.PodPending {
		t.Fatalf("replaced pod's phase = %q", got)
	}
}

func TestPodStatusSinkNeverLeavesTerminalPhase(t *testing.T) {
	pod := apiPod("job", "u1")
	pod.Status.Phase = v1.PodSucceeded
	s, c := newPodSink(t, pod)
	if err := s.SyncPodStatus(t.Context(), pod, v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "patch")); n != 0 {
		t.Fatalf("patches = %d, want 0", n)
	}
	if got := getPod(t, c, "job").Status.Phase; got != v1.PodSucceeded {
		t.Fatalf("phase = %q", got)
	}
}

func TestPodStatusSinkStaticPodGoesToMirror(t *testing.T) {
	static := staticPod("etcd", "h1")
	s, c := newPodSink(t)
	ctx := t.Context()
	st := v1.PodStatus{Phase: v1.PodRunning}
	if err := s.SyncPodStatus(ctx, static, st); !errors.Is(err, ErrNoMirrorPod) {
		t.Fatalf("no mirror: err = %v, want ErrNoMirrorPod", err)
	}
	stale := MirrorPod(staticPod("etcd", "h0"), nodeName, "node-uid")
	stale.UID = "mirror-0"
	if err := c.Tracker().Add(stale); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncPodStatus(ctx, static, st); !errors.Is(err, ErrNoMirrorPod) {
		t.Fatalf("stale mirror: err = %v, want ErrNoMirrorPod", err)
	}
	if n := len(actionsOf(c, "patch")); n != 0 {
		t.Fatalf("patches = %d, want 0", n)
	}
	if err := c.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "etcd"); err != nil {
		t.Fatal(err)
	}
	mirror := MirrorPod(static, nodeName, "node-uid")
	mirror.UID = "mirror-1"
	if err := c.Tracker().Add(mirror); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncPodStatus(ctx, static, st); err != nil {
		t.Fatal(err)
	}
	patches := actionsOf(c, "patch")
	if len(patches) != 1 {
		t.Fatalf("patches = %d, want 1", len(patches))
	}
	var body map[string]map[string]any
	if err := json.Unmarshal(patches[0].(clienttesting.PatchAction).GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	if body["metadata"]["uid"] != "mirror-1" {
		t.Fatalf("patch precondition uid = %v, want the mirror's", body["metadata"]["uid"])
	}
	if got := getPod(t, c, "etcd").Status.Phase; got != v1.PodRunning {
		t.Fatalf("mirror phase = %q", got)
	}
	// A mirror pod handed directly is never reported on.
	if err := s.SyncPodStatus(ctx, mirror, v1.PodStatus{Phase: v1.PodFailed}); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "patch")); n != 1 {
		t.Fatalf("patches = %d, want 1", n)
	}
}

func TestPodStatusSinkDeletePod(t *testing.T) {
	pod := apiPod("web", "u1")
	mirror := MirrorPod(staticPod("etcd", "h1"), nodeName, "node-uid")
	mirror.UID = "m1"
	s, c := newPodSink(t, pod, mirror)
	ctx := t.Context()
	if err := s.DeletePod(ctx, mirror); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePod(ctx, staticPod("etcd", "h1")); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "delete")); n != 0 {
		t.Fatalf("mirror/static pod deleted: %d deletes", n)
	}
	if err := s.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	dels := actionsOf(c, "delete")
	if len(dels) != 1 {
		t.Fatalf("deletes = %d, want 1", len(dels))
	}
	opts := dels[0].(clienttesting.DeleteActionImpl).DeleteOptions
	if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
		t.Fatalf("grace = %v, want 0", opts.GracePeriodSeconds)
	}
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "u1" {
		t.Fatalf("preconditions = %+v, want uid u1", opts.Preconditions)
	}
	if _, err := c.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Fatal("pod still exists")
	}
	// Already gone: no error.
	if err := s.DeletePod(ctx, pod); err != nil {
		t.Fatalf("deleting a gone pod: %v", err)
	}
	if err := s.DeletePod(ctx, nil); !errors.Is(err, ErrInvalidPod) {
		t.Fatalf("nil pod: err = %v", err)
	}
}

func TestPodStatusSinkReportsAPIErrors(t *testing.T) {
	pod := apiPod("web", "u1")
	s, c := newPodSink(t, pod)
	c.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("boom")
	})
	if err := s.SyncPodStatus(context.WithoutCancel(t.Context()), pod, v1.PodStatus{Phase: v1.PodRunning}); err == nil {
		t.Fatal("patch error not reported")
	}
	// The failed status was not recorded as sent: the next try sends it.
	c.ReactionChain = c.ReactionChain[1:]
	if err := s.SyncPodStatus(t.Context(), pod, v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		t.Fatal(err)
	}
	if got := getPod(t, c, "web").Status.Phase; got != v1.PodRunning {
		t.Fatalf("phase = %q", got)
	}
}

func TestPodStatusSinkCacheIsBounded(t *testing.T) {
	c := fake.NewClientset()
	s, err := NewPodStatusSink(PodStatusSinkConfig{Client: c, MaxCachedStatuses: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		uid := types.UID(fmt.Sprintf("u%d", i))
		if err := c.Tracker().Add(apiPod(string(uid), uid)); err != nil {
			t.Fatal(err)
		}
		if err := s.SyncPodStatus(t.Context(), apiPod(string(uid), uid), v1.PodStatus{Phase: v1.PodRunning}); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		n := len(s.sent)
		s.mu.Unlock()
		if n > 3 || n == 0 {
			t.Fatalf("cache holds %d statuses, want 1..3", n)
		}
	}
}

// A patch rejected by the UID precondition (the pod was replaced between
// the read and the patch) drops the status for a regular pod and asks a
// static pod to wait for its new mirror.
func TestPodStatusSinkUIDPreconditionFailure(t *testing.T) {
	pod := apiPod("web", "u1")
	static := staticPod("etcd", "h1")
	mirror := MirrorPod(static, nodeName, "node-uid")
	mirror.UID = "m1"
	s, c := newPodSink(t, pod, mirror)
	c.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(v1.Resource("pods"), a.(clienttesting.PatchAction).GetName(), errors.New("uid mismatch"))
	})
	if err := s.SyncPodStatus(t.Context(), pod, v1.PodStatus{Phase: v1.PodRunning}); err != nil {
		t.Fatalf("regular pod: %v", err)
	}
	if err := s.SyncPodStatus(t.Context(), static, v1.PodStatus{Phase: v1.PodRunning}); !errors.Is(err, ErrNoMirrorPod) {
		t.Fatalf("static pod: err = %v, want ErrNoMirrorPod", err)
	}
	s.mu.Lock()
	n := len(s.sent)
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d statuses recorded as sent after rejected patches", n)
	}
}

// TestConstructorsReportEveryProblem: NewMirrorClient and NewPodStatusSink
// name every bad field at once.
func TestConstructorsReportEveryProblem(t *testing.T) {
	_, mirrorErr := NewMirrorClient(MirrorClientConfig{Period: -1})
	_, statusErr := NewPodStatusSink(PodStatusSinkConfig{MaxCachedStatuses: -1})
	for _, tc := range []struct {
		name  string
		err   error
		names []string
	}{
		{"NewMirrorClient", mirrorErr, []string{"Client", "NodeName", "Period"}},
		{"NewPodStatusSink", statusErr, []string{"Client", "MaxCachedStatuses"}},
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

// TestPodStatusSinkKeepsMirrorTimesOfStaticPod: a restarted agent has no
// cached status, so its first status of a static pod has a new start time
// and new condition transition times. The sink keeps the mirror pod's start
// time and the transition times of unchanged conditions (as the kubelet's
// status manager reads a static pod's old status from its mirror), so the
// restart patches nothing; a condition that did change gets its new time.
func TestPodStatusSinkKeepsMirrorTimesOfStaticPod(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	static := staticPod("etcd", "h1")
	mirror := MirrorPod(static, nodeName, "node-uid")
	mirror.UID = "mirror-1"
	mirror.Status = v1.PodStatus{Phase: v1.PodRunning, StartTime: &t0, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t0},
	}}
	s, c := newPodSink(t, mirror)
	ctx := t.Context()
	// The restarted agent: same conditions, new times.
	st := v1.PodStatus{Phase: v1.PodRunning, StartTime: &t1, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: t1},
		{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: t1},
	}}
	if err := s.SyncPodStatus(ctx, static, st); err != nil {
		t.Fatal(err)
	}
	if n := len(actionsOf(c, "patch")); n != 0 {
		t.Fatalf("patches = %d, want 0: only the times differ from the mirror's", n)
	}
	if st.StartTime != &t1 || st.Conditions[0].LastTransitionTime != t1 {
		t.Fatal("the caller's status was modified")
	}
	// ContainersReady flips: it gets the agent's time, the rest keep the
	// mirror's.
	st.Conditions[1] = v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, LastTransitionTime: t1}
	if err := s.SyncPodStatus(ctx, static, st); err != nil {
		t.Fatal(err)
	}
	got := getPod(t, c, "etcd").Status
	if !got.StartTime.Equal(&t0) {
		t.Errorf("startTime %v, want the mirror's %v", got.StartTime, t0)
	}
	for _, cond := range got.Conditions {
		want := t0
		if cond.Type == v1.ContainersReady {
			want = t1
		}
		if !cond.LastTransitionTime.Equal(&want) {
			t.Errorf("condition %s: lastTransitionTime %v, want %v", cond.Type, cond.LastTransitionTime, want)
		}
	}
}
