package kubetypes

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOpString(t *testing.T) {
	want := map[Op]string{SET: "SET", ADD: "ADD", UPDATE: "UPDATE", REMOVE: "REMOVE", DELETE: "DELETE", RECONCILE: "RECONCILE", Op(42): "UNKNOWN"}
	for op, s := range want {
		if op.String() != s {
			t.Errorf("Op(%d) = %q, want %q", int(op), op.String(), s)
		}
	}
}

func TestPodPredicates(t *testing.T) {
	prio := func(p int32) *int32 { return &p }
	ann := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	cases := []struct {
		name                     string
		pod                      *v1.Pod
		static, mirror, critical bool
	}{
		{name: "nil", pod: nil},
		{name: "no annotations", pod: &v1.Pod{}},
		{name: "api source", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: ann(ConfigSourceAnnotation, SourceAPI)}}},
		{name: "file source", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: ann(ConfigSourceAnnotation, SourceFile)}}, static: true, critical: true},
		{name: "empty source is not the API server", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: ann(ConfigSourceAnnotation, "")}}, static: true, critical: true},
		{name: "mirror", pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: ann(ConfigMirrorAnnotation, "h")}}, mirror: true, critical: true},
		{name: "critical priority", pod: &v1.Pod{Spec: v1.PodSpec{Priority: prio(SystemCriticalPriority)}}, critical: true},
		{name: "below critical priority", pod: &v1.Pod{Spec: v1.PodSpec{Priority: prio(SystemCriticalPriority - 1)}}},
	}
	for _, tc := range cases {
		if got := IsStaticPod(tc.pod); got != tc.static {
			t.Errorf("%s: IsStaticPod = %v", tc.name, got)
		}
		if got := IsMirrorPod(tc.pod); got != tc.mirror {
			t.Errorf("%s: IsMirrorPod = %v", tc.name, got)
		}
		if got := IsCriticalPod(tc.pod); got != tc.critical {
			t.Errorf("%s: IsCriticalPod = %v", tc.name, got)
		}
	}
}

func TestSyncResult(t *testing.T) {
	var r SyncResult
	if r.Err() != nil || r.FailedSince(0) {
		t.Fatal("empty result failed")
	}
	r.Add(StepResult{Action: ActionCreateSandbox, Target: "ns/p"})
	r.Add(StepResult{Action: ActionStartContainer, Target: "app", Err: ErrCrashLoopBackOff})
	if !r.FailedSince(1) || r.FailedSince(2) {
		t.Fatal("FailedSince does not look at the steps from its index")
	}
	if err := r.Err(); !errors.Is(err, ErrCrashLoopBackOff) || err.Error() != "StartContainer app: runtime: container in crash-loop back-off" {
		t.Fatalf("Err() = %v", err)
	}
}
