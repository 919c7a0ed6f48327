package podstatus

import (
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
)

// Container status builders for the phase tables (the kubelet's test shapes).
func pstWaiting(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}
}

func pstWaitingLastExit(name string, code int32) v1.ContainerStatus {
	s := pstWaiting(name)
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return s
}

func pstRunning(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func pstStarted(name string) v1.ContainerStatus {
	s := pstRunning(name)
	t := true
	s.Started = &t
	return s
}

func pstExited(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func pstSpec(policy v1.RestartPolicy, init []v1.Container, names ...string) v1.PodSpec {
	s := v1.PodSpec{RestartPolicy: policy, InitContainers: init}
	for _, n := range names {
		s.Containers = append(s.Containers, v1.Container{Name: n})
	}
	return s
}

func pstPolicy(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }

type pstPhaseCase struct {
	name        string
	statuses    []v1.ContainerStatus
	terminal    bool
	initialized bool
	want        v1.PodPhase
}

func pstRunPhase(t *testing.T, spec v1.PodSpec, cases []pstPhaseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: spec}
			if got := computePhase(pod, tc.statuses, tc.terminal, tc.initialized); got != tc.want {
				t.Errorf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStatusPhaseRestartAlways(t *testing.T) {
	pstRunPhase(t, pstSpec(v1.RestartPolicyAlways, nil, "a", "b"), []pstPhaseCase{
		{name: "nothing yet", want: v1.PodPending},
		{name: "all running", statuses: []v1.ContainerStatus{pstRunning("a"), pstRunning("b")}, want: v1.PodRunning},
		{name: "all stopped restart", statuses: []v1.ContainerStatus{pstExited("a", 0), pstExited("b", 0)}, want: v1.PodRunning},
		{name: "all succeeded, terminal", statuses: []v1.ContainerStatus{pstExited("a", 0), pstExited("b", 0)}, terminal: true, want: v1.PodSucceeded},
		{name: "one failed, terminal", statuses: []v1.ContainerStatus{pstExited("a", 0), pstExited("b", -1)}, terminal: true, want: v1.PodFailed},
		{name: "running and stopped", statuses: []v1.ContainerStatus{pstRunning("a"), pstExited("b", 0)}, want: v1.PodRunning},
		{name: "one unknown", statuses: []v1.ContainerStatus{pstRunning("a")}, want: v1.PodPending},
		{name: "one waiting", statuses: []v1.ContainerStatus{pstRunning("a"), pstWaiting("b")}, want: v1.PodPending},
		{name: "crash-loop back-off", statuses: []v1.ContainerStatus{pstRunning("a"), pstWaitingLastExit("b", 0)}, want: v1.PodRunning},
	})
}

func TestStatusPhaseRestartAlwaysInitContainers(t *testing.T) {
	spec := pstSpec(v1.RestartPolicyAlways, []v1.Container{{Name: "x"}}, "a", "b")
	pstRunPhase(t, spec, []pstPhaseCase{
		{name: "init running", statuses: []v1.ContainerStatus{pstRunning("x")}, want: v1.PodPending},
		{name: "init failed, will restart", statuses: []v1.ContainerStatus{pstExited("x", -1)}, want: v1.PodPending},
		{name: "init waiting after success", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0)}, want: v1.PodPending},
		{name: "init waiting after failure", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", -1)}, want: v1.PodPending},
		{name: "init waiting", statuses: []v1.ContainerStatus{pstWaiting("x")}, want: v1.PodPending},
		{name: "init succeeded", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("a"), pstRunning("b")}, want: v1.PodRunning},
	})
}

func TestStatusPhaseRestartAlwaysSidecars(t *testing.T) {
	spec := pstSpec(v1.RestartPolicyAlways, []v1.Container{{Name: "x", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}}, "a", "b")
	pstRunPhase(t, spec, []pstPhaseCase{
		{name: "empty", want: v1.PodPending},
		{name: "sidecar running", statuses: []v1.ContainerStatus{pstRunning("x")}, want: v1.PodPending},
		{name: "sidecar stopped", statuses: []v1.ContainerStatus{pstExited("x", 0)}, want: v1.PodPending},
		{name: "sidecar waiting after zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0)}, want: v1.PodPending},
		{name: "sidecar waiting after non-zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", -1)}, want: v1.PodPending},
		{name: "sidecar waiting", statuses: []v1.ContainerStatus{pstWaiting("x")}, want: v1.PodPending},
		{name: "sidecar started, 1/2 running", statuses: []v1.ContainerStatus{pstStarted("x"), pstRunning("a")}, initialized: true, want: v1.PodPending},
		{name: "sidecar started, all running", statuses: []v1.ContainerStatus{pstStarted("x"), pstRunning("a"), pstRunning("b")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar running, all running", statuses: []v1.ContainerStatus{pstRunning("x"), pstRunning("a"), pstRunning("b")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar stopped, all running", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("a"), pstRunning("b")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar back-off, all running", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0), pstRunning("a"), pstRunning("b")}, initialized: true, want: v1.PodRunning},
		{name: "sidecar failed, all succeeded, terminal", statuses: []v1.ContainerStatus{pstExited("x", -1), pstExited("a", 0), pstExited("b", 0)}, terminal: true, initialized: true, want: v1.PodSucceeded},
		{name: "sidecar succeeded, all succeeded, terminal", statuses: []v1.ContainerStatus{pstExited("x", 0), pstExited("a", 0), pstExited("b", 0)}, terminal: true, initialized: true, want: v1.PodSucceeded},
		{name: "re-initializing after a new sandbox", statuses: []v1.ContainerStatus{pstRunning("x"), pstRunning("a"), pstRunning("b")}, want: v1.PodPending},
	})
}

func TestStatusPhaseRestartAlwaysPodHasRun(t *testing.T) {
	spec := pstSpec(v1.RestartPolicyAlways, []v1.Container{{Name: "x"}, {Name: "y", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}}, "a")
	pstRunPhase(t, spec, []pstPhaseCase{
		{name: "all running", statuses: []v1.ContainerStatus{pstRunning("x"), pstRunning("y"), pstRunning("a")}, want: v1.PodPending},
		{name: "regular stopped, inits running", statuses: []v1.ContainerStatus{pstRunning("x"), pstRunning("y"), pstExited("a", 0)}, want: v1.PodPending},
		{name: "re-created sandbox", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("y"), pstExited("a", 0)}, want: v1.PodPending},
		{name: "initialized, regular stopped", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("y"), pstExited("a", 0)}, initialized: true, want: v1.PodRunning},
		{name: "initialized, all running", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("y"), pstRunning("a")}, initialized: true, want: v1.PodRunning},
	})
}

func TestStatusPhaseRestartNever(t *testing.T) {
	pstRunPhase(t, pstSpec(v1.RestartPolicyNever, nil, "a", "b"), []pstPhaseCase{
		{name: "nothing yet", want: v1.PodPending},
		{name: "all running", statuses: []v1.ContainerStatus{pstRunning("a"), pstRunning("b")}, want: v1.PodRunning},
		{name: "all succeeded", statuses: []v1.ContainerStatus{pstExited("a", 0), pstExited("b", 0)}, want: v1.PodSucceeded},
		{name: "all failed", statuses: []v1.ContainerStatus{pstExited("a", -1), pstExited("b", -1)}, want: v1.PodFailed},
		{name: "running and succeeded", statuses: []v1.ContainerStatus{pstRunning("a"), pstExited("b", 0)}, want: v1.PodRunning},
		{name: "one unknown", statuses: []v1.ContainerStatus{pstRunning("a")}, want: v1.PodPending},
		{name: "one waiting", statuses: []v1.ContainerStatus{pstRunning("a"), pstWaiting("b")}, want: v1.PodPending},
	})
}

func TestStatusPhaseRestartNeverInitContainers(t *testing.T) {
	spec := pstSpec(v1.RestartPolicyNever, []v1.Container{{Name: "x"}}, "a", "b")
	pstRunPhase(t, spec, []pstPhaseCase{
		{name: "empty", want: v1.PodPending},
		{name: "init running", statuses: []v1.ContainerStatus{pstRunning("x")}, want: v1.PodPending},
		{name: "init failed", statuses: []v1.ContainerStatus{pstExited("x", -1)}, want: v1.PodFailed},
		{name: "init waiting after zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0)}, want: v1.PodPending},
		{name: "init waiting after non-zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", -1)}, want: v1.PodFailed},
		{name: "init waiting", statuses: []v1.ContainerStatus{pstWaiting("x")}, want: v1.PodPending},
		{name: "init succeeded", statuses: []v1.ContainerStatus{pstExited("x", 0), pstRunning("a"), pstRunning("b")}, want: v1.PodRunning},
	})
}

func TestStatusPhaseRestartNeverSidecars(t *testing.T) {
	spec := pstSpec(v1.RestartPolicyNever, []v1.Container{{Name: "x", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}}, "a", "b")
	pstRunPhase(t, spec, []pstPhaseCase{
		{name: "empty", want: v1.PodPending},
		{name: "sidecar running", statuses: []v1.ContainerStatus{pstRunning("x")}, want: v1.PodPending},
		{name: "sidecar stopped", statuses: []v1.ContainerStatus{pstExited("x", 0)}, want: v1.PodPending},
		{name: "sidecar waiting after zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0)}, want: v1.PodPending},
		{name: "sidecar waiting after non-zero", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", -1)}, want: v1.PodPending},
		{name: "sidecar waiting", statuses: []v1.ContainerStatus{pstWaiting("x")}, want: v1.PodPending},
		{name: "sidecar started, one running", statuses: []v1.ContainerStatus{pstStarted("x"), pstRunning("a")}, initialized: true, want: v1.PodPending},
		{name: "sidecar started, mains succeeded", statuses: []v1.ContainerStatus{pstStarted("x"), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodRunning},
		{name: "sidecar re-running, mains succeeded", statuses: []v1.ContainerStatus{pstRunning("x"), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodRunning},
		{name: "all succeeded", statuses: []v1.ContainerStatus{pstExited("x", 0), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodSucceeded},
		{name: "sidecar failed, mains succeeded", statuses: []v1.ContainerStatus{pstExited("x", -1), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodSucceeded},
		{name: "sidecar back-off, mains succeeded", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", 0), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodSucceeded},
		{name: "sidecar back-off non-zero, mains succeeded", statuses: []v1.ContainerStatus{pstWaitingLastExit("x", -1), pstExited("a", 0), pstExited("b", 0)}, initialized: true, want: v1.PodSucceeded},
	})
}

func TestStatusPhaseRestartOnFailure(t *testing.T) {
	pstRunPhase(t, pstSpec(v1.RestartPolicyOnFailure, nil, "a", "b"), []pstPhaseCase{
		{name: "nothing yet", want: v1.PodPending},
		{name: "all running", statuses: []v1.ContainerStatus{pstRunning("a"), pstRunning("b")}, want: v1.PodRunning},
		{name: "all succeeded", statuses: []v1.ContainerStatus{pstExited("a", 0), pstExited("b", 0)}, want: v1.PodSucceeded},
		{name: "all failed, restarting", statuses: []v1.ContainerStatus{pstExited("a", -1), pstExited("b", -1)}, want: v1.PodRunning},
		{name: "running and succeeded", statuses: []v1.ContainerStatus{pstRunning("a"), pstExited("b", 0)}, want: v1.PodRunning},
		{name: "one unknown", statuses: []v1.ContainerStatus{pstRunning("a")}, want: v1.PodPending},
		{name: "one waiting", statuses: []v1.ContainerStatus{pstRunning("a"), pstWaiting("b")}, want: v1.PodPending},
		{name: "crash-loop back-off", statuses: []v1.ContainerStatus{pstRunning("a"), pstWaitingLastExit("b", 1)}, want: v1.PodRunning},
	})
}

func TestStatusPhaseContainerRestartPolicy(t *testing.T) {
	one := func(policy v1.RestartPolicy, cs ...v1.Container) v1.PodSpec {
		return v1.PodSpec{RestartPolicy: policy, Containers: cs}
	}
	cases := []struct {
		name     string
		spec     v1.PodSpec
		statuses []v1.ContainerStatus
		want     v1.PodPhase
	}{
		{"container Never overrides pod Always", one(v1.RestartPolicyAlways, v1.Container{Name: "f", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever)}),
			[]v1.ContainerStatus{pstExited("f", -1)}, v1.PodFailed},
		{"container OnFailure restarts a failure", one(v1.RestartPolicyAlways, v1.Container{Name: "f", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyOnFailure)}),
			[]v1.ContainerStatus{pstExited("f", -1)}, v1.PodRunning},
		{"container Always restarts", one(v1.RestartPolicyAlways, v1.Container{Name: "f", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}),
			[]v1.ContainerStatus{pstExited("f", -1)}, v1.PodRunning},
		{"one container restarts under pod Never", one(v1.RestartPolicyNever, v1.Container{Name: "a", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways)}, v1.Container{Name: "b"}),
			[]v1.ContainerStatus{pstExited("a", 0), pstExited("b", -1)}, v1.PodRunning},
		{"never-restart failure fails the pod", one(v1.RestartPolicyAlways, v1.Container{Name: "a", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever)}, v1.Container{Name: "b", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyOnFailure)}),
			[]v1.ContainerStatus{pstExited("a", -1), pstExited("b", 0)}, v1.PodFailed},
		{"all succeeded", one(v1.RestartPolicyAlways, v1.Container{Name: "a", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever)}, v1.Container{Name: "b", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyOnFailure)}),
			[]v1.ContainerStatus{pstExited("a", 0), pstExited("b", 0)}, v1.PodSucceeded},
		{"restart rule on exit code", one(v1.RestartPolicyNever, v1.Container{Name: "a", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}),
			[]v1.ContainerStatus{pstExited("a", 42)}, v1.PodRunning},
		{"restart rule not matching", one(v1.RestartPolicyNever, v1.Container{Name: "a", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}}),
			[]v1.ContainerStatus{pstExited("a", 1)}, v1.PodFailed},
		{"init container Never under pod Always fails", v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways,
			InitContainers: []v1.Container{{Name: "i", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyNever)}}, Containers: []v1.Container{{Name: "a"}}},
			[]v1.ContainerStatus{pstExited("i", 1)}, v1.PodFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := computePhase(&v1.Pod{Spec: tc.spec}, tc.statuses, false, false); got != tc.want {
				t.Errorf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestStatusPhaseStaticPodNotTerminal(t *testing.T) {
	// As in the kubelet, a terminal pod that is static gets no terminal
	// phase from podIsTerminal alone: the restart policy decides.
	pod := &v1.Pod{Spec: pstSpec(v1.RestartPolicyAlways, nil, "a")}
	pod.Annotations = map[string]string{kubetypes.ConfigSourceAnnotation: "file"}
	if got := computePhase(pod, []v1.ContainerStatus{pstExited("a", 0)}, true, true); got != v1.PodRunning {
		t.Errorf("static pod phase = %s, want Running", got)
	}
	pod.Annotations[kubetypes.ConfigSourceAnnotation] = kubetypes.SourceAPI
	if got := computePhase(pod, []v1.ContainerStatus{pstExited("a", 0)}, true, true); got != v1.PodSucceeded {
		t.Errorf("API pod phase = %s, want Succeeded", got)
	}
}
