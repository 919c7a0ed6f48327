package kuberuntime

import (
	"fmt"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// KillReason says why a running container is to be killed.
type KillReason string

const (
	KillReasonSpecChanged     KillReason = "SpecChanged"
	KillReasonLivenessProbe   KillReason = "LivenessProbe"
	KillReasonStartupProbe    KillReason = "StartupProbe"
	KillReasonUnknownState    KillReason = "Unknown"
	KillReasonPostStartFailed KillReason = "FailedPostStartHook"
)

// ContainerToKill is one container instance that SyncPod will stop.
type ContainerToKill struct {
	// ID is the CRI container id; Name the container's name.
	ID   string
	Name string
	// Container is the spec (from InitContainers or Containers).
	Container *v1.Container
	Reason    KillReason
	Message   string
}

// PodActions is what SyncPod will do for a pod (the kubelet's podActions).
type PodActions struct {
	// KillPod: stop every container and sandbox of the pod first.
	KillPod bool
	// CreateSandbox: make a new sandbox (then init containers restart from the first).
	CreateSandbox bool
	// SandboxID is the existing sandbox containers start in (or the one replaced).
	SandboxID string
	// Attempt is the sandbox attempt number to create with.
	Attempt uint32
	// InitContainersToStart are indexes into spec.initContainers, in order.
	InitContainersToStart []int
	// ContainersToStart are indexes into spec.containers, in order.
	ContainersToStart []int
	// ContainersToKill are running instances to stop (when not KillPod).
	ContainersToKill []ContainerToKill
}

// String is a short summary for logs.
func (a PodActions) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "KillPod=%t CreateSandbox=%t SandboxID=%q Attempt=%d Init=%v Start=%v Kill=[",
		a.KillPod, a.CreateSandbox, a.SandboxID, a.Attempt, a.InitContainersToStart, a.ContainersToStart)
	for i, k := range a.ContainersToKill {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s(%s)", k.Name, k.Reason)
	}
	b.WriteByte(']')
	return b.String()
}

// IsRestartableInitContainer reports whether an init container is a sidecar
// (restartPolicy Always).
func IsRestartableInitContainer(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// podRestartsOnFailure: the pod-level policy is not Never.
func podRestartsOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

// matchRestartRule finds the first of the container's restartPolicyRules
// that matches exitCode.
func matchRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range r.ExitCodes.Values {
			if v == exitCode {
				in = true
				break
			}
		}
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return r, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return r, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// restartAfterExit decides whether a container that exited with exitCode
// restarts: its restartPolicyRules first, then its own restartPolicy, then
// the pod's (the ContainerRestartRules feature, on in 1.36).
func restartAfterExit(c *v1.Container, pod *v1.Pod, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if r, ok := matchRestartRule(c, exitCode); ok && r.Action == v1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch pod.Spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true
}

// shouldRestart: should a container that is not running be (re)started?
func shouldRestart(c *v1.Container, pod *v1.Pod, status *kubetypes.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil {
		return true
	}
	switch cs.State {
	case kubetypes.ContainerStateRunning:
		return false
	case kubetypes.ContainerStateUnknown, kubetypes.ContainerStateCreated:
		return true
	}
	return restartAfterExit(c, pod, cs.ExitCode)
}

func succeeded(c *v1.Container, status *kubetypes.PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	return cs != nil && cs.State == kubetypes.ContainerStateExited && cs.ExitCode == 0
}

func initContainerFailed(cs *kubetypes.ContainerStatus) bool {
	return cs.Reason == "OOMKilled" ||
		(cs.State == kubetypes.ContainerStateExited && cs.ExitCode != 0) ||
		cs.State == kubetypes.ContainerStateUnknown
}

// anyRegularContainerCreated: some app container was ever created (so the
// pod got past its init containers).
func anyRegularContainerCreated(pod *v1.Pod, status *kubetypes.PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs == nil {
			continue
		}
		switch cs.State {
		case kubetypes.ContainerStateCreated, kubetypes.ContainerStateRunning, kubetypes.ContainerStateExited:
			return true
		}
	}
	return false
}

// sandboxChanged says whether a new sandbox is needed, with the attempt
// number to use and the id of the current (newest) sandbox.
func sandboxChanged(pod *v1.Pod, status *kubetypes.PodStatus) (bool, uint32, string) {
	if len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	attempt := newest.GetMetadata().GetAttempt()
	if ready > 1 || newest.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true, attempt + 1, newest.GetId()
	}
	wantNet := runtimeapi.NamespaceMode_POD
	if pod.Spec.HostNetwork {
		wantNet = runtimeapi.NamespaceMode_NODE
	}
	if newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() != wantNet {
		return true, attempt + 1, ""
	}
	if !pod.Spec.HostNetwork && newest.GetNetwork() != nil && newest.GetNetwork().GetIp() == "" {
		return true, attempt + 1, newest.GetId()
	}
	return false, attempt, newest.GetId()
}

func (m *Manager) liveness(id string) kubetypes.ProbeResult {
	if m.cfg.Probes == nil {
		return kubetypes.ProbeSuccess
	}
	return m.cfg.Probes.Liveness(id)
}

func (m *Manager) startup(id string) kubetypes.ProbeResult {
	if m.cfg.Probes == nil {
		return kubetypes.ProbeSuccess
	}
	return m.cfg.Probes.Startup(id)
}

func (m *Manager) hash(c *v1.Container) uint64 { return hashContainer(&m.bufs, c) }

// ComputePodActions decides what SyncPod must do to bring the pod's runtime
// state (status) to its spec, as the kubelet's computePodActions does. It
// makes no CRI calls. An invalid pod (see SyncPod) yields no actions; a nil
// status counts as "nothing exists".
func (m *Manager) ComputePodActions(pod *v1.Pod, status *kubetypes.PodStatus) PodActions {
	if validatePod(pod) != nil {
		return PodActions{}
	}
	if status == nil {
		status = &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	create, attempt, sandboxID := sandboxChanged(pod, status)
	a := PodActions{KillPod: create, CreateSandbox: create, SandboxID: sandboxID, Attempt: attempt}

	if create {
		if !podRestartsOnFailure(pod) && attempt != 0 && len(status.ContainerStatuses) != 0 {
			// A Never pod that already ran something gets no new sandbox.
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			runOnce := pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
			if c.RestartPolicy != nil {
				runOnce = *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
			}
			if runOnce && succeeded(c, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		if len(toStart) == 0 && anyRegularContainerCreated(pod, status) {
			a.CreateSandbox = false
			return a
		}
		if len(pod.Spec.InitContainers) != 0 {
			a.InitContainersToStart = []int{0}
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	initialized := m.computeInitActions(pod, status, &a)
	if a.KillPod || !initialized {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubetypes.ContainerStateRunning {
			if shouldRestart(c, pod, status) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == kubetypes.ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
						ID: cs.ID, Name: c.Name, Container: c, Reason: KillReasonUnknownState,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
					})
				}
			}
			continue
		}
		restart := podRestartsOnFailure(pod)
		if c.RestartPolicy != nil {
			restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
		}
		var reason KillReason
		var msg string
		switch {
		case cs.Hash != m.hash(c):
			reason, msg, restart = KillReasonSpecChanged, fmt.Sprintf("Container %s definition changed", c.Name), true
		case m.liveness(cs.ID) == kubetypes.ProbeFailure:
			reason, msg = KillReasonLivenessProbe, fmt.Sprintf("Container %s failed liveness probe", c.Name)
		case m.startup(cs.ID) == kubetypes.ProbeFailure:
			reason, msg = KillReasonStartupProbe, fmt.Sprintf("Container %s failed startup probe", c.Name)
		default:
			keep++
			continue
		}
		if restart {
			msg += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: cs.ID, Name: c.Name, Container: c, Reason: reason, Message: msg})
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		a.KillPod = true
		// Sidecars alone don't keep a pod alive.
		a.InitContainersToStart = nil
	}
	return a
}

// computeInitActions fills the init-container part of a and reports
// whether the pod is initialized. It walks the init containers from the
// last one back (earlier ones may have been garbage collected), starts the
// next one to run, and keeps sidecars (restartable init containers) running.
func (m *Manager) computeInitActions(pod *v1.Pod, status *kubetypes.PodStatus, a *PodActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	// A created or running app container means initialization finished at
	// some point, even if init container records are gone now.
	initialized := false
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs != nil && (cs.State == kubetypes.ContainerStateCreated || cs.State == kubetypes.ContainerStateRunning) {
			initialized = true
			break
		}
	}
	previouslyInitialized := initialized
	var toStart []int // collected in reverse order
	kill := func(cs *kubetypes.ContainerStatus, c *v1.Container, r KillReason, msg string) {
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: cs.ID, Name: c.Name, Container: c, Reason: r, Message: msg})
	}

	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := IsRestartableInitContainer(c)
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil {
			if previouslyInitialized && sidecar {
				toStart = append(toStart, i)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			continue
		}
		switch cs.State {
		case kubetypes.ContainerStateCreated:
			// Created but never started: start it (again).
			toStart = append(toStart, i)
		case kubetypes.ContainerStateRunning:
			if !sidecar {
				break // still initializing
			}
			if c.StartupProbe != nil {
				switch m.startup(cs.ID) {
				case kubetypes.ProbeFailure:
					kill(cs, c, KillReasonStartupProbe, fmt.Sprintf("Init container %s failed startup probe", c.Name))
					toStart = append(toStart, i)
					goto next
				case kubetypes.ProbeUnknown:
					goto next // not started yet: wait
				}
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previouslyInitialized {
				toStart = append(toStart, i+1)
			}
			if cs.Hash != m.hash(c) {
				kill(cs, c, KillReasonSpecChanged, fmt.Sprintf("Init container %s definition changed", c.Name))
				toStart = append(toStart, i)
				break
			}
			if c.LivenessProbe != nil && m.liveness(cs.ID) == kubetypes.ProbeFailure {
				kill(cs, c, KillReasonLivenessProbe, fmt.Sprintf("Init container %s failed liveness probe", c.Name))
				toStart = append(toStart, i)
			}
		case kubetypes.ContainerStateExited:
			if sidecar {
				toStart = append(toStart, i)
				break
			}
			if initContainerFailed(cs) {
				if !restartAfterExit(c, pod, cs.ExitCode) {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
				toStart = append(toStart, i)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				toStart = append(toStart, i+1)
			}
		default: // unknown
			if !sidecar {
				restart := podRestartsOnFailure(pod)
				if c.RestartPolicy != nil {
					restart = *c.RestartPolicy != v1.ContainerRestartPolicyNever
				}
				if !restart {
					a.KillPod = true
					a.InitContainersToStart = nil
					return false
				}
			}
			kill(cs, c, KillReasonUnknownState, fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State))
			toStart = append(toStart, i)
		}
	next:
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		toStart = append(toStart, 0)
	}
	for l, r := 0, len(toStart)-1; l < r; l, r = l+1, r-1 {
		toStart[l], toStart[r] = toStart[r], toStart[l]
	}
	a.InitContainersToStart = toStart
	return initialized
}
