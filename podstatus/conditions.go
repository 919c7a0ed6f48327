package podstatus

import (
	"fmt"
	"strings"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Reasons the agent writes into pod conditions and container states, with
// the same spelling as the kubelet so that tools reading pod status (kubectl,
// controllers) see what they expect.
const (
	// ReasonContainerCreating is the waiting reason of a container that has
	// not been created yet in a pod without init containers.
	ReasonContainerCreating = "ContainerCreating"
	// ReasonPodInitializing is the waiting reason of a container that has not
	// been created yet in a pod with init containers.
	ReasonPodInitializing = "PodInitializing"
	// ReasonContainerStatusUnknown is the terminated reason of a container
	// whose end the agent did not see (exit code 137).
	ReasonContainerStatusUnknown = "ContainerStatusUnknown"
	// ReasonUnknownContainerStatuses: the condition could not be computed
	// because no container status is known.
	ReasonUnknownContainerStatuses = "UnknownContainerStatuses"
	// ReasonPodCompleted: Ready/ContainersReady are false because the pod succeeded.
	ReasonPodCompleted = "PodCompleted"
	// ReasonPodFailed: Ready/ContainersReady are false because the pod failed.
	ReasonPodFailed = "PodFailed"
	// ReasonContainersNotReady: some container is not ready.
	ReasonContainersNotReady = "ContainersNotReady"
	// ReasonContainersNotInitialized: some init container has not completed.
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	// ReasonReadinessGatesNotReady: a readiness gate's condition is missing or not True.
	ReasonReadinessGatesNotReady = "ReadinessGatesNotReady"
)

// terminatedUnknownMessage is the message of a container marked
// terminated because its end was not observed before the pod was terminated.
const terminatedUnknownMessage = "The container could not be located when the pod was terminated"

// vanishedMessage is the message of the last termination state
// recorded for a running container that disappeared from the runtime.
const vanishedMessage = "The container could not be located when the pod was deleted.  The container used to be Running"

// conditionOwnedByAgent reports whether the agent owns (computes and
// overwrites) a pod condition of this type; other conditions are kept as
// the API (or whoever wrote them) set them.
func conditionOwnedByAgent(t v1.PodConditionType) bool {
	switch t {
	case v1.PodScheduled, v1.PodReady, v1.PodInitialized, v1.ContainersReady,
		v1.PodResizeInProgress, v1.PodResizePending, v1.PodReadyToStartContainers,
		v1.AllContainersRestarting:
		return true
	}
	return false
}

// conditionShared reports whether a condition is written by the agent
// and others alike (the agent replaces its own copy).
func conditionShared(t v1.PodConditionType) bool {
	return t == v1.DisruptionTarget
}

// FindCondition returns the index and a pointer to the condition of
// the given type in list, or -1 and nil.
func FindCondition(list []v1.PodCondition, t v1.PodConditionType) (int, *v1.PodCondition) {
	for i := range list {
		if list[i].Type == t {
			return i, &list[i]
		}
	}
	return -1, nil
}

// replaceOrAppendCondition sets c in list, replacing the condition of
// the same type if there is one.
// ApplyKillStatus writes the status a kill decided (an eviction's or a
// preemption's) into s, the status the pod is stopped with: its phase,
// reason and message, and each of its conditions, replacing the condition
// of the same type or added. It is what a KillPodAndWait status function
// does.
func ApplyKillStatus(s *v1.PodStatus, kill v1.PodStatus) {
	s.Phase, s.Reason, s.Message = kill.Phase, kill.Reason, kill.Message
	for _, c := range kill.Conditions {
		s.Conditions = replaceOrAppendCondition(s.Conditions, c)
	}
}

func replaceOrAppendCondition(list []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	if i, _ := FindCondition(list, c.Type); i >= 0 {
		list[i] = c
		return list
	}
	return append(list, c)
}

// findContainerStatus returns the status of the named container.
func findContainerStatus(list []v1.ContainerStatus, name string) (v1.ContainerStatus, bool) {
	for i := range list {
		if list[i].Name == name {
			return list[i], true
		}
	}
	return v1.ContainerStatus{}, false
}

// isSidecar reports whether an init container is a sidecar
// (restartable init container, restartPolicy Always).
func isSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// IsTerminalPhase reports whether a phase is Succeeded or Failed.
func IsTerminalPhase(p v1.PodPhase) bool {
	return p == v1.PodSucceeded || p == v1.PodFailed
}

// containersReadyCondition computes ContainersReady: True when every
// regular container and every sidecar is ready. A succeeded pod (with every
// status known) or a failed pod reports False with PodCompleted / PodFailed.
func containersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.ContainersReady, ObservedGeneration: pod.Generation, Status: v1.ConditionFalse}
	if statuses == nil {
		cond.Reason = ReasonUnknownContainerStatuses
		return cond
	}
	var unknown, unready []string
	check := func(c *v1.Container) {
		s, ok := findContainerStatus(statuses, c.Name)
		switch {
		case !ok:
			unknown = append(unknown, c.Name)
		case !s.Ready:
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	if (phase == v1.PodSucceeded && len(unknown) == 0) || phase == v1.PodFailed {
		return terminalReadyCondition(pod, v1.ContainersReady, phase)
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", nameList(unknown)))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", nameList(unready)))
	}
	if len(msgs) > 0 {
		cond.Reason = ReasonContainersNotReady
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// nameList formats names the way Go prints a []string ("[a b]"),
// which is the spelling the kubelet's messages use.
func nameList(names []string) string {
	return "[" + strings.Join(names, " ") + "]"
}

// terminalReadyCondition is the Ready or ContainersReady condition of
// a pod in a terminal phase: False with PodCompleted or PodFailed.
func terminalReadyCondition(pod *v1.Pod, t v1.PodConditionType, phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: t, Status: v1.ConditionFalse}
	if pod != nil {
		cond.ObservedGeneration = pod.Generation
	}
	switch phase {
	case v1.PodFailed:
		cond.Reason = ReasonPodFailed
	case v1.PodSucceeded:
		cond.Reason = ReasonPodCompleted
	}
	return cond
}

// PodReadyCondition computes Ready: ContainersReady, and then every
// readiness gate's condition (looked up in conds) must be True.
func PodReadyCondition(pod *v1.Pod, conds []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := containersReadyCondition(pod, statuses, phase)
	cond := v1.PodCondition{Type: v1.PodReady, ObservedGeneration: pod.Generation}
	if cr.Status != v1.ConditionTrue {
		cond.Status, cond.Reason, cond.Message = cr.Status, cr.Reason, cr.Message
		return cond
	}
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		_, c := FindCondition(conds, g.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", string(g.ConditionType), c.Status))
		}
	}
	if len(msgs) > 0 {
		cond.Status = v1.ConditionFalse
		cond.Reason = ReasonReadinessGatesNotReady
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// containerInitialized reports whether one init container counts as done: a
// sidecar once started, a regular init container once ready (exited 0).
func containerInitialized(c *v1.Container, s *v1.ContainerStatus) bool {
	if isSidecar(c) {
		return s.Started != nil && *s.Started
	}
	return s.Ready
}

// anyRegularContainerStarted reports whether a regular container has
// left the waiting state (it runs or has run).
func anyRegularContainerStarted(spec *v1.PodSpec, statuses []v1.ContainerStatus) bool {
	for i := range spec.Containers {
		s, ok := findContainerStatus(statuses, spec.Containers[i].Name)
		if ok && (s.State.Running != nil || s.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// initializedCondition computes Initialized: True once every init
// container is done, once a regular container has started, or for a
// succeeded pod (reason PodCompleted).
func initializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodInitialized, ObservedGeneration: pod.Generation, Status: v1.ConditionFalse}
	if statuses == nil && len(pod.Spec.InitContainers) > 0 {
		cond.Reason = ReasonUnknownContainerStatuses
		return cond
	}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		s, ok := findContainerStatus(statuses, c.Name)
		if !ok {
			unknown = append(unknown, c.Name)
			continue
		}
		if !containerInitialized(c, &s) {
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		cond.Status = v1.ConditionTrue
		cond.Reason = ReasonPodCompleted
		return cond
	}
	if anyRegularContainerStarted(&pod.Spec, statuses) {
		cond.Status = v1.ConditionTrue
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", nameList(unknown)))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", nameList(incomplete)))
	}
	if len(msgs) > 0 {
		cond.Reason = ReasonContainersNotInitialized
		cond.Message = strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// readyToStartContainersCondition computes PodReadyToStartContainers:
// True when the pod's newest sandbox is the only ready one, has the network
// namespace mode the pod asks for, and (unless host-network) has an IP;
// that is, when no new sandbox is needed.
func readyToStartContainersCondition(pod *v1.Pod, rs *kubetypes.PodStatus) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodReadyToStartContainers, ObservedGeneration: pod.Generation, Status: v1.ConditionFalse}
	if !sandboxNeeded(pod, rs) {
		cond.Status = v1.ConditionTrue
	}
	return cond
}

// sandboxNeeded reports whether the runtime would have to create a new
// sandbox for the pod (the kubelet's PodSandboxChanged).
func sandboxNeeded(pod *v1.Pod, rs *kubetypes.PodStatus) bool {
	if rs == nil || len(rs.SandboxStatuses) == 0 || rs.SandboxStatuses[0] == nil {
		return true
	}
	ready := 0
	for _, sb := range rs.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := rs.SandboxStatuses[0]
	if ready > 1 || newest.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true
	}
	// The runtime may not report namespace options at all; only a reported
	// mode that differs from the pod's counts as a change.
	if opts := newest.GetLinux().GetNamespaces().GetOptions(); opts != nil {
		want := runtimeapi.NamespaceMode_POD
		if pod.Spec.HostNetwork {
			want = runtimeapi.NamespaceMode_NODE
		}
		if opts.GetNetwork() != want {
			return true
		}
	}
	if !pod.Spec.HostNetwork && newest.GetNetwork() != nil && newest.GetNetwork().GetIp() == "" {
		return true
	}
	return false
}

// setTransitionTimes sets LastTransitionTime on every condition of
// status: kept from the old condition of the same type when its Status did
// not change, else now.
func setTransitionTimes(status, old *v1.PodStatus, now time.Time) {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if !conditionOwnedByAgent(c.Type) && !conditionShared(c.Type) {
			continue // someone else's condition keeps its own times
		}
		if _, oc := FindCondition(old.Conditions, c.Type); oc != nil && oc.Status == c.Status {
			c.LastTransitionTime = oc.LastTransitionTime
			continue
		}
		c.LastTransitionTime = metav1.NewTime(now)
	}
}
