package podstatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

var pstNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// pstReasons is a ReasonSource from a map of container name to reason.
type pstReasons map[string][2]string

func (r pstReasons) Reason(_ types.UID, c string) (string, string) {
	v := r[c]
	return v[0], v[1]
}

// pstProbes is a ProbeState from maps of container ID to result.
type pstProbes struct{ startup, readiness map[string]bool }

func (p pstProbes) Startup(id string) (bool, bool)   { v, ok := p.startup[id]; return v, ok }
func (p pstProbes) Readiness(id string) (bool, bool) { v, ok := p.readiness[id]; return v, ok }

func pstPod(policy v1.RestartPolicy, init []v1.Container, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1", Generation: 3}}
	p.Spec = pstSpec(policy, init, names...)
	for i := range p.Spec.Containers {
		p.Spec.Containers[i].Image = "img-" + p.Spec.Containers[i].Name
	}
	return p
}

func pstSandbox(created int64) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: created,
		Metadata: &runtimeapi.PodSandboxMetadata{}, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.5"}}
}

func pstCS(id, name string, state kubetypes.ContainerState, created time.Time) *kubetypes.ContainerStatus {
	cs := &kubetypes.ContainerStatus{ID: id, Name: name, State: state, CreatedAt: created, Image: "img-" + name, ImageID: "sha256:local", ImageRef: "img@sha256:abc"}
	if state != kubetypes.ContainerStateCreated {
		cs.StartedAt = created.Add(time.Second)
	}
	if state == kubetypes.ContainerStateExited {
		cs.FinishedAt = created.Add(2 * time.Second)
	}
	return cs
}

func pstFind(t *testing.T, list []v1.ContainerStatus, name string) v1.ContainerStatus {
	t.Helper()
	s, ok := findContainerStatus(list, name)
	if !ok {
		t.Fatalf("no status for container %q in %+v", name, list)
	}
	return s
}

func pstCond(t *testing.T, s v1.PodStatus, ct v1.PodConditionType) v1.PodCondition {
	t.Helper()
	_, c := FindCondition(s.Conditions, ct)
	if c == nil {
		t.Fatalf("no %s condition in %+v", ct, s.Conditions)
	}
	return *c
}

func TestGeneratePodStatusRunningPod(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a", "b")
	t0 := pstNow.Add(-time.Minute)
	rs := &kubetypes.PodStatus{ID: pod.UID, IPs: []string{"fd00::5", "10.0.0.5"},
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{
			pstCS("c-a", "a", kubetypes.ContainerStateRunning, t0),
			pstCS("c-b", "b", kubetypes.ContainerStateRunning, t0),
		}}
	g := Generator{RuntimeName: "fake", NodeIPs: []string{"192.168.1.2", "fd00::1"}}
	s := g.Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)

	if s.Phase != v1.PodRunning {
		t.Errorf("phase = %s", s.Phase)
	}
	a := pstFind(t, s.ContainerStatuses, "a")
	if a.ContainerID != "fake://c-a" || a.State.Running == nil || !a.Ready || a.Started == nil || !*a.Started {
		t.Errorf("container a = %+v", a)
	}
	if a.ImageID != "img@sha256:abc" || a.Image != "img-a" {
		t.Errorf("image = %q / %q", a.Image, a.ImageID)
	}
	if !a.State.Running.StartedAt.Time.Equal(t0.Add(time.Second)) {
		t.Errorf("startedAt = %v", a.State.Running.StartedAt)
	}
	if s.PodIP != "10.0.0.5" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::5" {
		t.Errorf("pod IPs = %q %+v", s.PodIP, s.PodIPs)
	}
	if s.HostIP != "192.168.1.2" || len(s.HostIPs) != 2 {
		t.Errorf("host IPs = %q %+v", s.HostIP, s.HostIPs)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		if c := pstCond(t, s, ct); c.Status != v1.ConditionTrue || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(pstNow) {
			t.Errorf("%s = %+v", ct, c)
		}
	}
	if s.StartTime == nil || !s.StartTime.Time.Equal(pstNow) {
		t.Errorf("start time = %v", s.StartTime)
	}
	if s.QOSClass != v1.PodQOSBestEffort || s.ObservedGeneration != 3 {
		t.Errorf("qos %s generation %d", s.QOSClass, s.ObservedGeneration)
	}

	// A second pass keeps StartTime and the transition times.
	s2 := g.Generate(pod, rs, s, nil, nil, pstNow.Add(time.Hour))
	if !s2.StartTime.Time.Equal(pstNow) || !pstCond(t, s2, v1.PodReady).LastTransitionTime.Time.Equal(pstNow) {
		t.Errorf("second pass moved times: start %v ready %v", s2.StartTime, pstCond(t, s2, v1.PodReady).LastTransitionTime)
	}
}

func TestGeneratePodStatusDefaultsAndNilInput(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	s := Generate(pod, nil, v1.PodStatus{}, nil, nil, pstNow)
	a := pstFind(t, s.ContainerStatuses, "a")
	if a.State.Waiting == nil || a.State.Waiting.Reason != ReasonContainerCreating || a.Image != "img-a" {
		t.Errorf("missing container = %+v", a)
	}
	if s.Phase != v1.PodPending {
		t.Errorf("phase %s", s.Phase)
	}
	if c := pstCond(t, s, v1.PodReadyToStartContainers); c.Status != v1.ConditionFalse {
		t.Errorf("ReadyToStartContainers without a sandbox = %+v", c)
	}
	if c := pstCond(t, s, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Reason != ReasonContainersNotReady || c.Message != "containers with unready status: [a]" {
		t.Errorf("ContainersReady = %+v", c)
	}
	old := v1.PodStatus{Phase: v1.PodRunning}
	if got := Generate(nil, nil, old, nil, nil, pstNow); got.Phase != v1.PodRunning {
		t.Errorf("nil pod: %+v", got)
	}
}

func TestGeneratePodStatusContainerIDPrefixDefault(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	rs := &kubetypes.PodStatus{ContainerStatuses: []*kubetypes.ContainerStatus{pstCS("x1", "a", kubetypes.ContainerStateRunning, pstNow)}}
	s := Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	if id := pstFind(t, s.ContainerStatuses, "a").ContainerID; id != "containerd://x1" {
		t.Errorf("container ID %q", id)
	}
}

func TestGeneratePodStatusPodInitializingAndInitDone(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, []v1.Container{{Name: "init", Image: "img-init"}}, "a")
	t0 := pstNow.Add(-time.Minute)
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{pstCS("i1", "init", kubetypes.ContainerStateRunning, t0)}}
	s := Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	if a := pstFind(t, s.ContainerStatuses, "a"); a.State.Waiting == nil || a.State.Waiting.Reason != ReasonPodInitializing {
		t.Errorf("regular container while init runs = %+v", a.State)
	}
	if c := pstCond(t, s, v1.PodInitialized); c.Status != v1.ConditionFalse || c.Reason != ReasonContainersNotInitialized ||
		c.Message != "containers with incomplete status: [init]" {
		t.Errorf("Initialized = %+v", c)
	}
	if s.Phase != v1.PodPending {
		t.Errorf("phase %s", s.Phase)
	}

	// The init container exited 0 and the app runs.
	done := pstCS("i1", "init", kubetypes.ContainerStateExited, t0)
	rs.ContainerStatuses = []*kubetypes.ContainerStatus{pstCS("c1", "a", kubetypes.ContainerStateRunning, t0.Add(5*time.Second)), done}
	s = Generate(pod, rs, s, nil, nil, pstNow)
	init := pstFind(t, s.InitContainerStatuses, "init")
	if init.State.Terminated == nil || init.State.Terminated.ExitCode != 0 || !init.Ready || init.State.Terminated.ContainerID != "containerd://i1" {
		t.Errorf("init status = %+v", init)
	}
	if c := pstCond(t, s, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s", s.Phase)
	}

	// The runtime garbage-collected the init container: it completed.
	rs.ContainerStatuses = rs.ContainerStatuses[:1]
	s = Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	init = pstFind(t, s.InitContainerStatuses, "init")
	if init.State.Terminated == nil || init.State.Terminated.Reason != "Completed" || init.State.Terminated.ExitCode != 0 {
		t.Errorf("forgotten init container = %+v", init.State)
	}
}

func TestGeneratePodStatusWaitingReasons(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a", "b")
	t0 := pstNow.Add(-time.Minute)
	dead := pstCS("c2", "a", kubetypes.ContainerStateExited, t0.Add(time.Second))
	dead.ExitCode, dead.Reason, dead.RestartCount = 2, "Error", 1
	older := pstCS("c1", "a", kubetypes.ContainerStateExited, t0)
	older.ExitCode = 1
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{older, dead}} // out of order on purpose
	reasons := pstReasons{"a": {"CrashLoopBackOff", "back-off 10s restarting failed container"}, "b": {"ErrImagePull", "no registry"}}
	s := Generate(pod, rs, v1.PodStatus{}, reasons, nil, pstNow)

	a := pstFind(t, s.ContainerStatuses, "a")
	if a.State.Waiting == nil || a.State.Waiting.Reason != "CrashLoopBackOff" || a.State.Waiting.Message == "" {
		t.Errorf("a state = %+v", a.State)
	}
	if lt := a.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 2 || lt.Reason != "Error" || lt.ContainerID != "containerd://c2" {
		t.Errorf("a last termination = %+v", a.LastTerminationState)
	}
	if a.RestartCount != 1 || a.ContainerID != "containerd://c2" || a.Ready {
		t.Errorf("a = %+v", a)
	}
	b := pstFind(t, s.ContainerStatuses, "b")
	if b.State.Waiting == nil || b.State.Waiting.Reason != "ErrImagePull" || b.State.Waiting.Message != "no registry" {
		t.Errorf("b state = %+v", b.State)
	}
	if s.Phase != v1.PodPending {
		t.Errorf("phase %s (b never ran)", s.Phase)
	}
	if s.ContainerStatuses[0].Name != "a" || s.ContainerStatuses[1].Name != "b" {
		t.Errorf("statuses not sorted by name")
	}

	// Under restart policy Never an exited container is not restarted: no
	// waiting reason replaces its terminated state.
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	s = Generate(pod, rs, v1.PodStatus{}, reasons, nil, pstNow)
	if a := pstFind(t, s.ContainerStatuses, "a"); a.State.Terminated == nil || a.State.Terminated.ExitCode != 2 {
		t.Errorf("Never: a state = %+v", a.State)
	}
	// A deleted pod restarts nothing either.
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.DeletionTimestamp = &metav1.Time{Time: pstNow}
	s = Generate(pod, rs, v1.PodStatus{}, reasons, nil, pstNow)
	if b := pstFind(t, s.ContainerStatuses, "b"); b.State.Waiting == nil || b.State.Waiting.Reason != ReasonContainerCreating {
		t.Errorf("deleted pod: b state = %+v", b.State)
	}
}

func TestGeneratePodStatusUnknownStateAfterRunning(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	old := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", ContainerID: "containerd://c1", RestartCount: 4, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
	}}
	cs := pstCS("c1", "a", kubetypes.ContainerStateUnknown, pstNow.Add(-time.Minute))
	cs.RestartCount = 4
	rs := &kubetypes.PodStatus{ContainerStatuses: []*kubetypes.ContainerStatus{cs}}
	s := Generate(pod, rs, old, nil, nil, pstNow)
	a := pstFind(t, s.ContainerStatuses, "a")
	if tm := a.State.Terminated; tm == nil || tm.ExitCode != 137 || tm.Reason != ReasonContainerStatusUnknown || tm.Message != terminatedUnknownMessage {
		t.Errorf("state = %+v", a.State)
	}
	if a.RestartCount != 5 {
		t.Errorf("restart count = %d, want 5", a.RestartCount)
	}

	// Without a running past, an unknown container is just waiting.
	s = Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	if a := pstFind(t, s.ContainerStatuses, "a"); a.State.Waiting == nil {
		t.Errorf("unknown without history = %+v", a.State)
	}
}

func TestGeneratePodStatusVanishedRunningContainer(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	old := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", ContainerID: "containerd://c1", RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
	}}
	s := Generate(pod, &kubetypes.PodStatus{}, old, nil, nil, pstNow)
	a := pstFind(t, s.ContainerStatuses, "a")
	if a.State.Waiting == nil || a.State.Waiting.Reason != ReasonContainerCreating {
		t.Errorf("state = %+v", a.State)
	}
	if lt := a.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 || lt.Reason != ReasonContainerStatusUnknown {
		t.Errorf("last termination = %+v", a.LastTerminationState)
	}
	if a.RestartCount != 3 {
		t.Errorf("restart count = %d, want 3", a.RestartCount)
	}
	// With that last termination the pod stays Running, not Pending.
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s", s.Phase)
	}
	// A deleted pod does not count a restart.
	pod.DeletionTimestamp = &metav1.Time{Time: pstNow}
	if a := pstFind(t, Generate(pod, &kubetypes.PodStatus{}, old, nil, nil, pstNow).ContainerStatuses, "a"); a.RestartCount != 2 {
		t.Errorf("deleted pod restart count = %d", a.RestartCount)
	}
}

func TestGeneratePodStatusKeepsOldTerminatedStatus(t *testing.T) {
	pod := pstPod(v1.RestartPolicyNever, nil, "a")
	term := &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", ContainerID: "containerd://c1"}
	old := v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", ContainerID: "containerd://c1", State: v1.ContainerState{Terminated: term}},
	}}
	// The runtime forgot the container; the old terminated status stands.
	s := Generate(pod, &kubetypes.PodStatus{}, old, nil, nil, pstNow)
	if a := pstFind(t, s.ContainerStatuses, "a"); a.State.Terminated == nil || a.State.Terminated.ExitCode != 3 {
		t.Errorf("state = %+v", a.State)
	}
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" {
		t.Errorf("phase %s reason %q", s.Phase, s.Reason)
	}
	if c := pstCond(t, s, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != ReasonPodFailed {
		t.Errorf("Ready = %+v", c)
	}
}

func TestGeneratePodStatusNeverLeavesTerminalPhase(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(1)},
		ContainerStatuses: []*kubetypes.ContainerStatus{pstCS("c1", "a", kubetypes.ContainerStateRunning, pstNow)}}
	// The previous status was terminal.
	if s := Generate(pod, rs, v1.PodStatus{Phase: v1.PodSucceeded}, nil, nil, pstNow); s.Phase != v1.PodSucceeded {
		t.Errorf("left old terminal phase: %s", s.Phase)
	}
	// The API says terminal.
	pod.Status.Phase = v1.PodFailed
	if s := Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow); s.Phase != v1.PodFailed {
		t.Errorf("left API terminal phase: %s", s.Phase)
	}
}

func TestGeneratePodStatusTerminal(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	done := pstCS("c1", "a", kubetypes.ContainerStateExited, pstNow)
	rs := &kubetypes.PodStatus{ContainerStatuses: []*kubetypes.ContainerStatus{done}}
	if s := Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow); s.Phase != v1.PodRunning {
		t.Errorf("restartable exited pod: %s", s.Phase)
	}
	s := Generator{}.GenerateTerminal(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	if s.Phase != v1.PodSucceeded {
		t.Errorf("terminal pod: %s", s.Phase)
	}
	if c := pstCond(t, s, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Reason != ReasonPodCompleted {
		t.Errorf("ContainersReady = %+v", c)
	}
	if c := pstCond(t, s, v1.PodInitialized); c.Status != v1.ConditionTrue || c.Reason != ReasonPodCompleted {
		t.Errorf("Initialized = %+v", c)
	}
}

func TestGeneratePodStatusProbes(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a", "b", "c")
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
	pod.Spec.Containers[1].ReadinessProbe = &v1.Probe{}
	t0 := pstNow.Add(-time.Minute)
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{
			pstCS("ca", "a", kubetypes.ContainerStateRunning, t0),
			pstCS("cb", "b", kubetypes.ContainerStateRunning, t0),
			pstCS("cc", "c", kubetypes.ContainerStateRunning, t0),
		}}
	probes := pstProbes{startup: map[string]bool{}, readiness: map[string]bool{}}
	s := Generate(pod, rs, v1.PodStatus{}, nil, probes, pstNow)
	a, b, c := pstFind(t, s.ContainerStatuses, "a"), pstFind(t, s.ContainerStatuses, "b"), pstFind(t, s.ContainerStatuses, "c")
	if *a.Started || a.Ready {
		t.Errorf("a before its startup probe: started %v ready %v", *a.Started, a.Ready)
	}
	if !*b.Started || b.Ready {
		t.Errorf("b before its readiness probe: started %v ready %v", *b.Started, b.Ready)
	}
	if !*c.Started || !c.Ready {
		t.Errorf("c without probes: started %v ready %v", *c.Started, c.Ready)
	}
	if cond := pstCond(t, s, v1.PodReady); cond.Status != v1.ConditionFalse || cond.Message != "containers with unready status: [a b]" {
		t.Errorf("Ready = %+v", cond)
	}

	probes.startup["containerd://ca"] = true
	probes.readiness["containerd://cb"] = true
	s = Generate(pod, rs, s, nil, probes, pstNow)
	if cond := pstCond(t, s, v1.PodReady); cond.Status != v1.ConditionTrue {
		t.Errorf("Ready after probes = %+v", cond)
	}
	// Once started, an instance stays started without a new result.
	delete(probes.startup, "containerd://ca")
	s = Generate(pod, rs, s, nil, probes, pstNow)
	if a := pstFind(t, s.ContainerStatuses, "a"); !*a.Started {
		t.Errorf("a lost its started state")
	}
}

func TestGeneratePodStatusSidecarReadiness(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, []v1.Container{{Name: "side", RestartPolicy: pstPolicy(v1.ContainerRestartPolicyAlways), ReadinessProbe: &v1.Probe{}}}, "a")
	t0 := pstNow.Add(-time.Minute)
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{
			pstCS("cs", "side", kubetypes.ContainerStateRunning, t0),
			pstCS("ca", "a", kubetypes.ContainerStateRunning, t0.Add(time.Second)),
		}}
	probes := pstProbes{readiness: map[string]bool{}}
	s := Generate(pod, rs, v1.PodStatus{}, nil, probes, pstNow)
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s", s.Phase)
	}
	if c := pstCond(t, s, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
	if c := pstCond(t, s, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [side]" {
		t.Errorf("ContainersReady = %+v", c)
	}
	probes.readiness["containerd://cs"] = true
	s = Generate(pod, rs, s, nil, probes, pstNow)
	if c := pstCond(t, s, v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Errorf("ContainersReady = %+v", c)
	}
}

func TestGeneratePodStatusConditionsFromAPI(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	pod.Status.Conditions = []v1.PodCondition{
		{Type: "example.com/lb", Status: v1.ConditionFalse},
		{Type: v1.PodReady, Status: v1.ConditionTrue}, // the agent's own: recomputed
	}
	rs := &kubetypes.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(1)},
		ContainerStatuses: []*kubetypes.ContainerStatus{pstCS("ca", "a", kubetypes.ContainerStateRunning, pstNow)}}
	old := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"}}}
	s := Generate(pod, rs, old, nil, nil, pstNow)
	if c := pstCond(t, s, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != ReasonReadinessGatesNotReady ||
		c.Message != `the status of pod readiness gate "example.com/lb" is not "True", but False` {
		t.Errorf("Ready = %+v", c)
	}
	if c := pstCond(t, s, v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Errorf("ContainersReady = %+v", c)
	}
	if c := pstCond(t, s, v1.DisruptionTarget); c.Reason != "EvictionByEvictionAPI" {
		t.Errorf("DisruptionTarget = %+v", c)
	}
	n := 0
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Ready conditions", n)
	}

	pod.Status.Conditions = nil
	s = Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	if c := pstCond(t, s, v1.PodReady); c.Message != `corresponding condition of pod readiness gate "example.com/lb" does not exist.` {
		t.Errorf("Ready = %+v", c)
	}
}

func TestGeneratePodStatusHostNetworkPodIPs(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.HostNetwork = true
	g := Generator{NodeIPs: []string{"bogus", "10.1.1.1", "fd00::1"}}
	s := g.Generate(pod, &kubetypes.PodStatus{}, v1.PodStatus{}, nil, nil, pstNow)
	if s.PodIP != "10.1.1.1" || len(s.PodIPs) != 2 || s.PodIPs[1].IP != "fd00::1" {
		t.Errorf("pod IPs %q %+v", s.PodIP, s.PodIPs)
	}
	if s.HostIP != "10.1.1.1" {
		t.Errorf("host IP %q", s.HostIP)
	}
	// NodeIPsFunc is read at each generation and wins over NodeIPs; when
	// it gives none, NodeIPs is used.
	now := []string{"fd00::2"}
	g.NodeIPsFunc = func() []string { return now }
	s = g.Generate(pod, &kubetypes.PodStatus{}, v1.PodStatus{}, nil, nil, pstNow)
	if s.HostIP != "fd00::2" || len(s.HostIPs) != 1 || s.PodIP != "fd00::2" {
		t.Errorf("NodeIPsFunc: host IP %q %+v pod IP %q", s.HostIP, s.HostIPs, s.PodIP)
	}
	now = nil
	s = g.Generate(pod, &kubetypes.PodStatus{}, v1.PodStatus{}, nil, nil, pstNow)
	if s.HostIP != "10.1.1.1" {
		t.Errorf("NodeIPsFunc without IPs: host IP %q, want NodeIPs' 10.1.1.1", s.HostIP)
	}
}

func TestStatusSandboxNeeded(t *testing.T) {
	pod := pstPod(v1.RestartPolicyAlways, nil, "a")
	ready := pstSandbox(2)
	notReady := &runtimeapi.PodSandboxStatus{Id: "old", State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: 1}
	noIP := pstSandbox(2)
	noIP.Network.Ip = ""
	hostNS := pstSandbox(2)
	hostNS.Linux = &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}}
	cases := []struct {
		name string
		sbs  []*runtimeapi.PodSandboxStatus
		want bool
	}{
		{"none", nil, true},
		{"ready", []*runtimeapi.PodSandboxStatus{ready, notReady}, false},
		{"newest not ready", []*runtimeapi.PodSandboxStatus{notReady, ready}, true},
		{"two ready", []*runtimeapi.PodSandboxStatus{ready, pstSandbox(1)}, true},
		{"no IP", []*runtimeapi.PodSandboxStatus{noIP}, true},
		{"network namespace changed", []*runtimeapi.PodSandboxStatus{hostNS}, true},
	}
	for _, tc := range cases {
		if got := sandboxNeeded(pod, &kubetypes.PodStatus{SandboxStatuses: tc.sbs}); got != tc.want {
			t.Errorf("%s: needed = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestStatusQOSClass(t *testing.T) {
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	ctr := func(req, lim v1.ResourceList) v1.Container {
		return v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	cases := []struct {
		name string
		pod  v1.Pod
		want v1.PodQOSClass
	}{
		{"nothing", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(nil, nil)}}}, v1.PodQOSBestEffort},
		{"only ephemeral-storage", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}, nil)}}}, v1.PodQOSBestEffort},
		{"requests = limits", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi"))}}}, v1.PodQOSGuaranteed},
		{"limits only", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(nil, rl("1", "1Gi"))}}}, v1.PodQOSBurstable},
		{"requests below limits", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("500m", "1Gi"), rl("1", "1Gi"))}}}, v1.PodQOSBurstable},
		{"cpu limit only", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("1", ""), rl("1", ""))}}}, v1.PodQOSBurstable},
		{"second container best effort", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(rl("1", "1Gi"), rl("1", "1Gi")), ctr(nil, nil)}}}, v1.PodQOSBurstable},
		{"init container counts", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{ctr(rl("1", ""), nil)}, Containers: []v1.Container{ctr(nil, nil)}}}, v1.PodQOSBurstable},
		{"pod-level resources", v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Requests: rl("1", "1Gi"), Limits: rl("1", "1Gi")}, Containers: []v1.Container{ctr(nil, nil)}}}, v1.PodQOSGuaranteed},
		{"status wins", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{ctr(nil, nil)}}, Status: v1.PodStatus{QOSClass: v1.PodQOSGuaranteed}}, v1.PodQOSGuaranteed},
	}
	for _, tc := range cases {
		if got := qosClass(&tc.pod); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

func BenchmarkGeneratePodStatus(b *testing.B) {
	pod := pstPod(v1.RestartPolicyAlways, []v1.Container{{Name: "init"}}, "a", "b", "c")
	t0 := pstNow.Add(-time.Minute)
	init := pstCS("i", "init", kubetypes.ContainerStateExited, t0)
	rs := &kubetypes.PodStatus{IPs: []string{"10.0.0.5"}, SandboxStatuses: []*runtimeapi.PodSandboxStatus{pstSandbox(t0.UnixNano())},
		ContainerStatuses: []*kubetypes.ContainerStatus{
			pstCS("a", "a", kubetypes.ContainerStateRunning, t0.Add(time.Second)),
			pstCS("b", "b", kubetypes.ContainerStateRunning, t0.Add(time.Second)),
			pstCS("c", "c", kubetypes.ContainerStateRunning, t0.Add(time.Second)), init,
		}}
	old := Generate(pod, rs, v1.PodStatus{}, nil, nil, pstNow)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		old = Generate(pod, rs, old, nil, nil, pstNow)
	}
}
