package podstatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestStatusContainersReadyCondition(t *testing.T) {
	sidecar := v1.Container{Name: "side", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}
	ready := func(name string) v1.ContainerStatus { s := pstRunning(name); s.Ready = true; return s }
	cases := []struct {
		name     string
		spec     v1.PodSpec
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		status   v1.ConditionStatus
		reason   string
		message  string
	}{
		{"no statuses", pstSpec("", nil, "a"), nil, v1.PodRunning, v1.ConditionFalse, ReasonUnknownContainerStatuses, ""},
		{"all ready", pstSpec("", nil, "a", "b"), []v1.ContainerStatus{ready("a"), ready("b")}, v1.PodRunning, v1.ConditionTrue, "", ""},
		{"one unknown", pstSpec("", nil, "a", "b"), []v1.ContainerStatus{ready("a")}, v1.PodRunning, v1.ConditionFalse, ReasonContainersNotReady, "containers with unknown status: [b]"},
		{"unknown and unready", pstSpec("", nil, "a", "b"), []v1.ContainerStatus{pstRunning("a")}, v1.PodRunning, v1.ConditionFalse, ReasonContainersNotReady,
			"containers with unknown status: [b], containers with unready status: [a]"},
		{"unready sidecar", pstSpec("", []v1.Container{sidecar}, "a"), []v1.ContainerStatus{pstRunning("side"), ready("a")}, v1.PodRunning, v1.ConditionFalse, ReasonContainersNotReady,
			"containers with unready status: [side]"},
		{"regular init container ignored", pstSpec("", []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{ready("a")}, v1.PodRunning, v1.ConditionTrue, "", ""},
		{"succeeded", pstSpec("", nil, "a"), []v1.ContainerStatus{pstExited("a", 0)}, v1.PodSucceeded, v1.ConditionFalse, ReasonPodCompleted, ""},
		{"succeeded with unknown", pstSpec("", nil, "a", "b"), []v1.ContainerStatus{pstExited("a", 0)}, v1.PodSucceeded, v1.ConditionFalse, ReasonContainersNotReady,
			"containers with unknown status: [b], containers with unready status: [a]"},
		{"failed", pstSpec("", nil, "a"), []v1.ContainerStatus{ready("a")}, v1.PodFailed, v1.ConditionFalse, ReasonPodFailed, ""},
	}
	for _, tc := range cases {
		c := containersReadyCondition(&v1.Pod{Spec: tc.spec}, tc.statuses, tc.phase)
		if c.Type != v1.ContainersReady || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
			t.Errorf("%s: %+v", tc.name, c)
		}
		r := PodReadyCondition(&v1.Pod{Spec: tc.spec}, nil, tc.statuses, tc.phase)
		if r.Type != v1.PodReady || r.Status != tc.status || r.Reason != tc.reason || r.Message != tc.message {
			t.Errorf("%s: Ready %+v does not follow ContainersReady", tc.name, r)
		}
	}
}

func TestStatusInitializedCondition(t *testing.T) {
	sidecar := v1.Container{Name: "side", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}
	doneInit := pstExited("i", 0)
	doneInit.Ready = true
	cases := []struct {
		name     string
		spec     v1.PodSpec
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		status   v1.ConditionStatus
		reason   string
		message  string
	}{
		{"no init containers", pstSpec("", nil, "a"), nil, v1.PodPending, v1.ConditionTrue, "", ""},
		{"no statuses", pstSpec("", []v1.Container{{Name: "i"}}, "a"), nil, v1.PodPending, v1.ConditionFalse, ReasonUnknownContainerStatuses, ""},
		{"init pending", pstSpec("", []v1.Container{{Name: "i"}, {Name: "j"}}, "a"), []v1.ContainerStatus{pstRunning("i")}, v1.PodPending, v1.ConditionFalse,
			ReasonContainersNotInitialized, "containers with unknown status: [j], containers with incomplete status: [i]"},
		{"init done", pstSpec("", []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{doneInit, pstWaiting("a")}, v1.PodPending, v1.ConditionTrue, "", ""},
		{"sidecar not started", pstSpec("", []v1.Container{sidecar}, "a"), []v1.ContainerStatus{pstRunning("side")}, v1.PodPending, v1.ConditionFalse,
			ReasonContainersNotInitialized, "containers with incomplete status: [side]"},
		{"sidecar started", pstSpec("", []v1.Container{sidecar}, "a"), []v1.ContainerStatus{pstStarted("side")}, v1.PodPending, v1.ConditionTrue, "", ""},
		{"regular container started", pstSpec("", []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{pstWaiting("i"), pstRunning("a")}, v1.PodRunning, v1.ConditionTrue, "", ""},
		{"succeeded", pstSpec("", []v1.Container{{Name: "i"}}, "a"), []v1.ContainerStatus{pstExited("i", 0), pstExited("a", 0)}, v1.PodSucceeded, v1.ConditionTrue, ReasonPodCompleted, ""},
	}
	for _, tc := range cases {
		c := initializedCondition(&v1.Pod{Spec: tc.spec}, tc.statuses, tc.phase)
		if c.Type != v1.PodInitialized || c.Status != tc.status || c.Reason != tc.reason || c.Message != tc.message {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestStatusPodReadyConditionReadinessGates(t *testing.T) {
	pod := &v1.Pod{Spec: pstSpec("", nil, "a")}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "g1"}, {ConditionType: "g2"}}
	ready := pstRunning("a")
	ready.Ready = true
	conds := []v1.PodCondition{{Type: "g1", Status: v1.ConditionTrue}}
	c := PodReadyCondition(pod, conds, []v1.ContainerStatus{ready}, v1.PodRunning)
	if c.Status != v1.ConditionFalse || c.Reason != ReasonReadinessGatesNotReady || c.Message != `corresponding condition of pod readiness gate "g2" does not exist.` {
		t.Errorf("%+v", c)
	}
	conds = append(conds, v1.PodCondition{Type: "g2", Status: v1.ConditionTrue})
	if c := PodReadyCondition(pod, conds, []v1.ContainerStatus{ready}, v1.PodRunning); c.Status != v1.ConditionTrue {
		t.Errorf("all gates true: %+v", c)
	}
}

// A kill's status (an eviction's) sets phase, reason and message, replaces
// the condition of the same type and adds the others, keeping the rest.
func TestApplyKillStatus(t *testing.T) {
	s := v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue},
		{Type: v1.DisruptionTarget, Status: v1.ConditionFalse},
	}}
	ApplyKillStatus(&s, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "low on memory", Conditions: []v1.PodCondition{
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet"},
		{Type: "Custom", Status: v1.ConditionTrue},
	}})
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" || s.Message != "low on memory" {
		t.Fatalf("phase/reason/message = %s/%s/%s", s.Phase, s.Reason, s.Message)
	}
	if len(s.Conditions) != 3 || s.Conditions[0].Type != v1.PodReady || s.Conditions[1].Status != v1.ConditionTrue ||
		s.Conditions[1].Reason != "TerminationByKubelet" || s.Conditions[2].Type != "Custom" {
		t.Fatalf("conditions = %+v", s.Conditions)
	}
}
