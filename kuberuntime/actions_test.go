package kuberuntime

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testclock "k8s.io/utils/clock/testing"
)

func newTestManager(t testing.TB, probes ProbeResults) (*Manager, *stubCRI, *testclock.FakeClock) {
	t.Helper()
	clk := testclock.NewFakeClock(time.Unix(1_700_000_000, 0))
	cri := newStubCRI(clk)
	m, err := New(Config{Runtime: cri, Images: cri, Clock: clk, Probes: probes, PodLogsRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m.builder = &stubBuilder{}
	return m, cri, clk
}

// basePod: three app containers, all running in a ready sandbox.
func basePod() (*v1.Pod, *kubetypes.PodStatus) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web", Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Image: "busybox:1"}, {Name: "b", Image: "busybox:1"}, {Name: "c", Image: "busybox:1"},
		}},
	}
	st := &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace,
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{
			Id: "sb0", State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: "x", Attempt: 0},
			Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1"},
		}},
	}
	for i := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, &kubetypes.ContainerStatus{
			ID: "id-" + pod.Spec.Containers[i].Name, Name: pod.Spec.Containers[i].Name, State: kubetypes.ContainerStateRunning,
			Hash: HashContainer(&pod.Spec.Containers[i]),
		})
	}
	return pod, st
}

func withInits(pod *v1.Pod, st *kubetypes.PodStatus, restartable bool) {
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "init:1"}, {Name: "i2", Image: "init:1"}, {Name: "i3", Image: "init:1"}}
	state := kubetypes.ContainerStateExited
	if restartable {
		for i := range pod.Spec.InitContainers {
			pod.Spec.InitContainers[i].RestartPolicy = &always
		}
		pod.Spec.InitContainers[1].LivenessProbe = &v1.Probe{}
		pod.Spec.InitContainers[1].StartupProbe = &v1.Probe{}
		pod.Spec.InitContainers[2].LivenessProbe = &v1.Probe{}
		pod.Spec.InitContainers[2].StartupProbe = &v1.Probe{}
		state = kubetypes.ContainerStateRunning
	}
	st.ContainerStatuses = nil
	for i := range pod.Spec.InitContainers {
		st.ContainerStatuses = append(st.ContainerStatuses, &kubetypes.ContainerStatus{
			ID: "id-" + pod.Spec.InitContainers[i].Name, Name: pod.Spec.InitContainers[i].Name, State: state,
			Hash: HashContainer(&pod.Spec.InitContainers[i]),
		})
	}
}

// kills lists (name, reason) of the containers to kill.
func kills(a PodActions) []string {
	var out []string
	for _, k := range a.ContainersToKill {
		out = append(out, k.Name+":"+string(k.Reason))
	}
	return out
}

type wantActions struct {
	kill, create bool
	sandbox      string
	attempt      uint32
	init, start  []int
	killed       []string
}

func checkActions(t *testing.T, got PodActions, w wantActions) {
	t.Helper()
	if got.KillPod != w.kill || got.CreateSandbox != w.create || got.SandboxID != w.sandbox || got.Attempt != w.attempt {
		t.Errorf("got %v, want kill=%t create=%t sandbox=%q attempt=%d", got, w.kill, w.create, w.sandbox, w.attempt)
	}
	if len(got.InitContainersToStart)+len(w.init) > 0 && !reflect.DeepEqual(got.InitContainersToStart, w.init) {
		t.Errorf("init to start = %v, want %v", got.InitContainersToStart, w.init)
	}
	if len(got.ContainersToStart)+len(w.start) > 0 && !reflect.DeepEqual(got.ContainersToStart, w.start) {
		t.Errorf("containers to start = %v, want %v", got.ContainersToStart, w.start)
	}
	if k := kills(got); len(k)+len(w.killed) > 0 && !reflect.DeepEqual(k, w.killed) {
		t.Errorf("containers to kill = %v, want %v", k, w.killed)
	}
}

func TestComputePodActions(t *testing.T) {
	probes := &stubProbes{liveness: map[string]kubetypes.ProbeResult{}, startup: map[string]kubetypes.ProbeResult{}}
	m, _, _ := newTestManager(t, probes)
	ok := wantActions{sandbox: "sb0"}
	for name, tc := range map[string]struct {
		pod    func(*v1.Pod)
		status func(*kubetypes.PodStatus)
		probes func()
		want   wantActions
	}{
		"all running: nothing to do": {want: ok},
		"new pod: sandbox and every container": {
			status: func(s *kubetypes.PodStatus) { s.SandboxStatuses, s.ContainerStatuses = nil, nil },
			want:   wantActions{kill: true, create: true, start: []int{0, 1, 2}},
		},
		"Always restarts exited containers, success or failure": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways },
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[0].State, s.ContainerStatuses[0].ExitCode = kubetypes.ContainerStateExited, 0
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 111
			},
			want: wantActions{sandbox: "sb0", start: []int{0, 1}},
		},
		"OnFailure restarts only failed containers": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[0].State, s.ContainerStatuses[0].ExitCode = kubetypes.ContainerStateExited, 0
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 111
			},
			want: wantActions{sandbox: "sb0", start: []int{1}},
		},
		"OnFailure restarts a created-but-never-started container": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[0].State, s.ContainerStatuses[0].ExitCode = kubetypes.ContainerStateExited, 0
				s.ContainerStatuses[1].State = kubetypes.ContainerStateCreated
			},
			want: wantActions{sandbox: "sb0", start: []int{1}},
		},
		"Never restarts nothing": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[0].State, s.ContainerStatuses[0].ExitCode = kubetypes.ContainerStateExited, 0
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 111
			},
			want: ok,
		},
		"dead sandbox, Always: kill and recreate everything": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways },
			status: func(s *kubetypes.PodStatus) { s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY },
			want:   wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, start: []int{0, 1, 2}},
		},
		"dead sandbox, OnFailure: recreate all but the succeeded": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 0
			},
			want: wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, start: []int{0, 2}},
		},
		"sandbox without IP: kill and recreate": {
			status: func(s *kubetypes.PodStatus) { s.SandboxStatuses[0].Network.Ip = "" },
			want:   wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, start: []int{0, 1, 2}},
		},
		"spec changed: kill and restart that container": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[1].Hash = 432423432 },
			want:   wantActions{sandbox: "sb0", start: []int{1}, killed: []string{"b:SpecChanged"}},
		},
		"liveness failure: kill and restart": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways },
			probes: func() { probes.liveness["id-b"] = kubetypes.ProbeFailure },
			want:   wantActions{sandbox: "sb0", start: []int{1}, killed: []string{"b:LivenessProbe"}},
		},
		"startup failure: kill and restart": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyAlways },
			probes: func() { probes.startup["id-b"] = kubetypes.ProbeFailure },
			want:   wantActions{sandbox: "sb0", start: []int{1}, killed: []string{"b:StartupProbe"}},
		},
		"liveness failure with Never: kill without restart": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			probes: func() { probes.liveness["id-b"] = kubetypes.ProbeFailure },
			want:   wantActions{sandbox: "sb0", killed: []string{"b:LivenessProbe"}},
		},
		"no ready sandbox, Never, all exited: no new sandbox, kill": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.SandboxStatuses[0].Metadata.Attempt = 1
				for _, cs := range s.ContainerStatuses {
					cs.State, cs.ExitCode = kubetypes.ContainerStateExited, 0
				}
			},
			want: wantActions{kill: true, sandbox: "sb0", attempt: 2},
		},
		"no ready sandbox, OnFailure, all succeeded: no new sandbox, kill": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.SandboxStatuses[0].Metadata.Attempt = 1
				for _, cs := range s.ContainerStatuses {
					cs.State, cs.ExitCode = kubetypes.ContainerStateExited, 0
				}
			},
			want: wantActions{kill: true, sandbox: "sb0", attempt: 2},
		},
		"no ready sandbox, Never, nothing ever created: new sandbox": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.SandboxStatuses[0].Metadata.Attempt = 2
				s.ContainerStatuses = nil
			},
			want: wantActions{kill: true, create: true, sandbox: "sb0", attempt: 3, start: []int{0, 1, 2}},
		},
		"unknown state, Never: kill and restart": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[1].State = kubetypes.ContainerStateUnknown },
			want:   wantActions{sandbox: "sb0", start: []int{1}, killed: []string{"b:Unknown"}},
		},
		"created state, Never: start it": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[1].State = kubetypes.ContainerStateCreated },
			want:   wantActions{sandbox: "sb0", start: []int{1}},
		},
		"deletionTimestamp: exited containers are not restarted": {
			pod: func(p *v1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now },
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 1
			},
			want: ok,
		},
		"everything exited, nothing to restart: kill the pod": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) {
				for _, cs := range s.ContainerStatuses {
					cs.State, cs.ExitCode = kubetypes.ContainerStateExited, 0
				}
			},
			want: wantActions{kill: true, sandbox: "sb0"},
		},
		"two ready sandboxes: reconcile with a new one": {
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses = append(s.SandboxStatuses, &runtimeapi.PodSandboxStatus{Id: "old", State: runtimeapi.PodSandboxState_SANDBOX_READY, Metadata: &runtimeapi.PodSandboxMetadata{}})
			},
			want: wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, start: []int{0, 1, 2}},
		},
		"hostNetwork changed: new sandbox, old id not reused": {
			pod:  func(p *v1.Pod) { p.Spec.HostNetwork = true },
			want: wantActions{kill: true, create: true, sandbox: "", attempt: 1, start: []int{0, 1, 2}},
		},
		"container restartPolicy Never overrides pod Always": {
			pod: func(p *v1.Pod) {
				never := v1.ContainerRestartPolicyNever
				p.Spec.Containers[1].RestartPolicy = &never
			},
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 1
			},
			want: ok,
		},
		"restartPolicyRules: Restart on exit code 42 despite Never": {
			pod: func(p *v1.Pod) {
				never := v1.ContainerRestartPolicyNever
				p.Spec.RestartPolicy = v1.RestartPolicyNever
				p.Spec.Containers[1].RestartPolicy = &never
				p.Spec.Containers[1].RestartPolicyRules = []v1.ContainerRestartRule{{
					Action:    v1.ContainerRestartRuleActionRestart,
					ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
				}}
			},
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[1].State, s.ContainerStatuses[1].ExitCode = kubetypes.ContainerStateExited, 42
			},
			want: wantActions{sandbox: "sb0", start: []int{1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			clear(probes.liveness)
			clear(probes.startup)
			pod, st := basePod()
			if tc.pod != nil {
				tc.pod(pod)
			}
			if tc.status != nil {
				tc.status(st)
			}
			if tc.probes != nil {
				tc.probes()
			}
			checkActions(t, m.ComputePodActions(pod, st), tc.want)
		})
	}
}

func TestComputePodActionsWithInitContainers(t *testing.T) {
	m, _, _ := newTestManager(t, nil)
	for name, tc := range map[string]struct {
		pod    func(*v1.Pod)
		status func(*kubetypes.PodStatus)
		want   wantActions
	}{
		"initialized: start every app container": {want: wantActions{sandbox: "sb0", start: []int{0, 1, 2}}},
		"nothing started: first init container": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses = nil },
			want:   wantActions{sandbox: "sb0", init: []int{0}},
		},
		"init in progress: wait": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].State = kubetypes.ContainerStateRunning },
			want:   wantActions{sandbox: "sb0"},
		},
		"dead sandbox: kill and restart from the first init container": {
			status: func(s *kubetypes.PodStatus) { s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY },
			want:   wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, init: []int{0}},
		},
		"last init failed, Always: restart it": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].ExitCode = 137 },
			want:   wantActions{sandbox: "sb0", init: []int{2}},
		},
		"last init failed, OnFailure: restart it": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].ExitCode = 137 },
			want:   wantActions{sandbox: "sb0", init: []int{2}},
		},
		"last init failed, Never: kill the pod": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].ExitCode = 137 },
			want:   wantActions{kill: true, sandbox: "sb0"},
		},
		"init unknown, Always: kill and restart it": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].State = kubetypes.ContainerStateUnknown },
			want:   wantActions{sandbox: "sb0", init: []int{2}, killed: []string{"i3:Unknown"}},
		},
		"init unknown, Never: kill the pod": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].State = kubetypes.ContainerStateUnknown },
			want:   wantActions{kill: true, sandbox: "sb0"},
		},
		"sandbox not ready, Never, init ran: kill only": {
			pod:    func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) { s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY },
			want:   wantActions{kill: true, sandbox: "sb0", attempt: 1},
		},
		"sandbox not ready, Never, nothing visible: new sandbox": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.ContainerStatuses = nil
			},
			want: wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, init: []int{0}},
		},
		"only the last init status left, running: don't rerun earlier ones": {
			status: func(s *kubetypes.PodStatus) {
				s.ContainerStatuses[2].State = kubetypes.ContainerStateRunning
				s.ContainerStatuses = s.ContainerStatuses[2:]
			},
			want: wantActions{sandbox: "sb0"},
		},
		"init stuck in created: start it": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses[2].State = kubetypes.ContainerStateCreated },
			want:   wantActions{sandbox: "sb0", init: []int{2}},
		},
		"first init done: start the second": {
			status: func(s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:1] },
			want:   wantActions{sandbox: "sb0", init: []int{1}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			pod, st := basePod()
			withInits(pod, st, false)
			if tc.pod != nil {
				tc.pod(pod)
			}
			if tc.status != nil {
				tc.status(st)
			}
			checkActions(t, m.ComputePodActions(pod, st), tc.want)
		})
	}
}

func TestComputePodActionsWithRestartableInitContainers(t *testing.T) {
	probes := &stubProbes{liveness: map[string]kubetypes.ProbeResult{}, startup: map[string]kubetypes.ProbeResult{}}
	m, _, _ := newTestManager(t, probes)
	appRunning := func(p *v1.Pod, s *kubetypes.PodStatus, state kubetypes.ContainerState) {
		for i := range p.Spec.Containers {
			s.ContainerStatuses = append(s.ContainerStatuses, &kubetypes.ContainerStatus{ID: "id-" + p.Spec.Containers[i].Name,
				Name: p.Spec.Containers[i].Name, State: state, Hash: HashContainer(&p.Spec.Containers[i])})
		}
	}
	for name, tc := range map[string]struct {
		pod    func(*v1.Pod)
		status func(*v1.Pod, *kubetypes.PodStatus)
		probes func()
		want   wantActions
	}{
		"sidecars up: start the app containers": {want: wantActions{sandbox: "sb0", start: []int{0, 1, 2}}},
		"nothing started: first sidecar": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = nil },
			want:   wantActions{sandbox: "sb0", init: []int{0}},
		},
		"sidecar stuck in created: start it": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.ContainerStatuses[2].State = kubetypes.ContainerStateCreated
			},
			want: wantActions{sandbox: "sb0", init: []int{2}},
		},
		"first sidecar running: start the next": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:1] },
			want:   wantActions{sandbox: "sb0", init: []int{1}},
		},
		"liveness not run yet: still start the next": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:2] },
			probes: func() { delete(probes.liveness, "id-i2") },
			want:   wantActions{sandbox: "sb0", init: []int{2}},
		},
		"liveness failed: kill and restart the sidecar, apps start": {
			probes: func() { probes.liveness["id-i3"] = kubetypes.ProbeFailure },
			want:   wantActions{sandbox: "sb0", init: []int{2}, start: []int{0, 1, 2}, killed: []string{"i3:LivenessProbe"}},
		},
		"startup not run yet: wait": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:2] },
			probes: func() { delete(probes.startup, "id-i2") },
			want:   wantActions{sandbox: "sb0"},
		},
		"startup done: start the next": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[:2] },
			want:   wantActions{sandbox: "sb0", init: []int{2}},
		},
		"startup failed: kill and restart the sidecar": {
			probes: func() { probes.startup["id-i3"] = kubetypes.ProbeFailure },
			want:   wantActions{sandbox: "sb0", init: []int{2}, killed: []string{"i3:StartupProbe"}},
		},
		"sidecar definition changed: kill and restart it": {
			pod:  func(p *v1.Pod) { p.Spec.InitContainers[2].Image = "other:2" },
			want: wantActions{sandbox: "sb0", init: []int{2}, start: []int{0, 1, 2}, killed: []string{"i3:SpecChanged"}},
		},
		"exited sidecars restart with the next init": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.ContainerStatuses[0].State = kubetypes.ContainerStateExited
				s.ContainerStatuses[2].State = kubetypes.ContainerStateExited
			},
			want: wantActions{sandbox: "sb0", init: []int{0, 2}},
		},
		"exited first sidecar restarts, apps start": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses[0].State = kubetypes.ContainerStateExited },
			want:   wantActions{sandbox: "sb0", init: []int{0}, start: []int{0, 1, 2}},
		},
		"sandbox not ready, Never, sidecar failed: kill only": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.ContainerStatuses[2].State, s.ContainerStatuses[2].ExitCode = kubetypes.ContainerStateExited, 137
			},
			want: wantActions{kill: true, sandbox: "sb0", attempt: 1},
		},
		"sandbox not ready, OnFailure: new sandbox from the first init": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				s.ContainerStatuses[2].State, s.ContainerStatuses[2].ExitCode = kubetypes.ContainerStateExited, 137
			},
			want: wantActions{kill: true, create: true, sandbox: "sb0", attempt: 1, init: []int{0}},
		},
		"failed sidecar restarts even with pod Never": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.ContainerStatuses[2].State, s.ContainerStatuses[2].ExitCode = kubetypes.ContainerStateExited, 137
			},
			want: wantActions{sandbox: "sb0", init: []int{2}},
		},
		"unknown sidecar: kill and restart even with Never": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) {
				s.ContainerStatuses[2].State = kubetypes.ContainerStateUnknown
			},
			want: wantActions{sandbox: "sb0", init: []int{2}, killed: []string{"i3:Unknown"}},
		},
		"sidecar restarts while apps run, Never": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(p *v1.Pod, s *kubetypes.PodStatus) {
				s.ContainerStatuses[2].State, s.ContainerStatuses[2].ExitCode = kubetypes.ContainerStateExited, 137
				appRunning(p, s, kubetypes.ContainerStateRunning)
			},
			want: wantActions{sandbox: "sb0", init: []int{2}},
		},
		"apps all succeeded, Never: kill the pod (sidecars don't keep it)": {
			pod: func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(p *v1.Pod, s *kubetypes.PodStatus) {
				appRunning(p, s, kubetypes.ContainerStateExited)
			},
			want: wantActions{kill: true, sandbox: "sb0"},
		},
		"earlier sidecar statuses gone, last running: restart them and the apps": {
			status: func(_ *v1.Pod, s *kubetypes.PodStatus) { s.ContainerStatuses = s.ContainerStatuses[2:] },
			want:   wantActions{sandbox: "sb0", init: []int{0, 1}, start: []int{0, 1, 2}},
		},
	} {
		t.Run(name, func(t *testing.T) {
			clear(probes.liveness)
			clear(probes.startup)
			for _, id := range []string{"id-i2", "id-i3"} {
				probes.liveness[id], probes.startup[id] = kubetypes.ProbeSuccess, kubetypes.ProbeSuccess
			}
			pod, st := basePod()
			withInits(pod, st, true)
			if tc.pod != nil {
				tc.pod(pod)
			}
			if tc.status != nil {
				tc.status(pod, st)
			}
			if tc.probes != nil {
				tc.probes()
			}
			checkActions(t, m.ComputePodActions(pod, st), tc.want)
		})
	}
}

func TestComputePodActionsInvalidInput(t *testing.T) {
	m, _, _ := newTestManager(t, nil)
	if a := m.ComputePodActions(nil, nil); a.KillPod || a.CreateSandbox || len(a.ContainersToStart) > 0 {
		t.Fatalf("nil pod gave actions %v", a)
	}
	pod, _ := basePod()
	a := m.ComputePodActions(pod, nil)
	checkActions(t, a, wantActions{kill: true, create: true, start: []int{0, 1, 2}})
}
