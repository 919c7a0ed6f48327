package podstatus

import (
	"net/netip"
	"sort"
	"time"

	"github.com/nodekit/nodekit/internal/qos"
	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ReasonSource tells why a container is waiting: the reason and message of
// its last failed start (CrashLoopBackOff, ErrImagePull, ImagePullBackOff,
// ErrImageNeverPull, CreateContainerConfigError, RunContainerError, ...), or
// "" when there is none. *kuberuntime.Manager satisfies it.
type ReasonSource interface {
	Reason(uid types.UID, container string) (reason, message string)
}

// ProbeState gives the latest probe results of container instances, keyed
// by the API container ID ("<runtime>://<id>", as in
// v1.ContainerStatus.ContainerID). ok is false while a probe has produced no
// result for that instance yet.
//
// A nil ProbeState means the agent runs no probes: a container counts as
// started once it runs, and as ready when it runs and has started. With a
// non-nil ProbeState, a container whose spec declares a startup (readiness)
// probe that has no result yet is not started (not ready).
type ProbeState interface {
	Startup(containerID string) (started, ok bool)
	Readiness(containerID string) (ready, ok bool)
}

// DefaultRuntimeName is the ContainerID prefix used when none is configured.
const DefaultRuntimeName = "containerd"

// Generator turns the runtime's view of a pod into its API status
// (the kubelet's generateAPIPodStatus). The zero value is ready to use.
type Generator struct {
	// RuntimeName prefixes container IDs: "<RuntimeName>://<id>".
	// Empty means DefaultRuntimeName.
	RuntimeName string
	// NodeIPs are the node's addresses, primary first: they become HostIP
	// and HostIPs (at most one per IP family), and the PodIPs of
	// host-network pods. Unparsable entries are ignored.
	NodeIPs []string
	// NodeIPsFunc, when set, gives the node's addresses at each
	// generation (they may change, e.g. when read from the Node object);
	// when it returns none, NodeIPs is used.
	NodeIPsFunc func() []string
}

// nodeIPs returns the node's addresses now.
func (g Generator) nodeIPs() []string {
	if g.NodeIPsFunc != nil {
		if ips := g.NodeIPsFunc(); len(ips) > 0 {
			return ips
		}
	}
	return g.NodeIPs
}

// Generate is Generator{}.Generate: the API status of pod
// from its runtime status rs, with container IDs prefixed "containerd://"
// and no host IPs. See Generator.Generate.
func Generate(pod *v1.Pod, rs *kubetypes.PodStatus, old v1.PodStatus, reasons ReasonSource, probes ProbeState, now time.Time) v1.PodStatus {
	return Generator{}.Generate(pod, rs, old, reasons, probes, now)
}

// Generate computes the API status of pod from its runtime status rs.
//
// old is the previous status of the pod (the status manager's, or
// pod.Status when it has none); it supplies restart counts, last
// termination states, StartTime, the reason of an unchanged phase and the
// transition times of unchanged conditions. pod.Status is read as the API's
// view: a terminal phase there is never left, and the conditions the agent
// does not own are carried over from it. reasons and probes may be nil. The
// function is pure: it reads its arguments and modifies none of them.
//
// A nil pod yields a copy of old; a nil rs is a pod with nothing in the runtime.
func (g Generator) Generate(pod *v1.Pod, rs *kubetypes.PodStatus, old v1.PodStatus, reasons ReasonSource, probes ProbeState, now time.Time) v1.PodStatus {
	return g.generate(pod, rs, old, reasons, probes, now, false)
}

// GenerateTerminal is Generate for a pod whose containers will not be
// restarted any more (it is being or has been terminated): once every
// container has stopped, the phase is Succeeded or Failed whatever the
// restart policy (except for static pods, as in the kubelet).
func (g Generator) GenerateTerminal(pod *v1.Pod, rs *kubetypes.PodStatus, old v1.PodStatus, reasons ReasonSource, probes ProbeState, now time.Time) v1.PodStatus {
	return g.generate(pod, rs, old, reasons, probes, now, true)
}

func (g Generator) generate(pod *v1.Pod, rs *kubetypes.PodStatus, old v1.PodStatus, reasons ReasonSource, probes ProbeState, now time.Time, podIsTerminal bool) v1.PodStatus {
	if pod == nil {
		return *old.DeepCopy()
	}
	if rs == nil {
		rs = &kubetypes.PodStatus{ID: pod.UID}
	}
	runtimeName := g.RuntimeName
	if runtimeName == "" {
		runtimeName = DefaultRuntimeName
	}
	nodeIPStrings := g.nodeIPs()
	nodeIPs := parseIPs(nodeIPStrings)

	var s v1.PodStatus
	s.ObservedGeneration = pod.Generation

	// Pod IPs: one per family, the node's family first.
	for _, ip := range sortPodIPs(rs.IPs, nodeIPs) {
		s.PodIPs = append(s.PodIPs, v1.PodIP{IP: ip})
	}
	if len(s.PodIPs) > 0 {
		s.PodIP = s.PodIPs[0].IP
	}
	s.QOSClass = qosClass(pod)

	conv := converter{pod: pod, rs: rs, reasons: reasons, runtimeName: runtimeName, hasInit: len(pod.Spec.InitContainers) > 0}
	s.ContainerStatuses = conv.convert(old.ContainerStatuses, pod.Spec.Containers, false)
	s.InitContainerStatuses = conv.convert(old.InitContainerStatuses, pod.Spec.InitContainers, true)
	if len(pod.Spec.EphemeralContainers) > 0 {
		eph := make([]v1.Container, 0, len(pod.Spec.EphemeralContainers))
		for i := range pod.Spec.EphemeralContainers {
			eph = append(eph, v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
		}
		s.EphemeralContainerStatuses = conv.convert(old.EphemeralContainerStatuses, eph, false)
	}
	applyProbes(pod, &s, probes)

	// Phase, then the three-way merge with the previous and the API status:
	// a terminal phase is never left.
	all := make([]v1.ContainerStatus, 0, len(s.InitContainerStatuses)+len(s.ContainerStatuses))
	all = append(append(all, s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Phase = computePhase(pod, all, podIsTerminal, activeRegularContainerStarted(pod, rs))
	if !IsTerminalPhase(s.Phase) {
		switch {
		case IsTerminalPhase(old.Phase):
			s.Phase = old.Phase
		case IsTerminalPhase(pod.Status.Phase):
			s.Phase = pod.Status.Phase
		}
	}
	if s.Phase == old.Phase {
		s.Reason, s.Message = old.Reason, old.Message
		if s.Reason == "" {
			s.Reason = pod.Status.Reason
		}
		if s.Message == "" {
			s.Message = pod.Status.Message
		}
	}
	if IsTerminalPhase(pod.Status.Phase) && s.Phase != pod.Status.Phase {
		s.Phase = pod.Status.Phase
	}

	// Conditions: others' conditions from the API, the shared
	// DisruptionTarget from the previous status, then the agent's own.
	s.Conditions = make([]v1.PodCondition, 0, len(pod.Status.Conditions)+5)
	for _, c := range pod.Status.Conditions {
		if !conditionOwnedByAgent(c.Type) {
			s.Conditions = append(s.Conditions, *c.DeepCopy())
		}
	}
	if _, dt := FindCondition(old.Conditions, v1.DisruptionTarget); dt != nil {
		s.Conditions = replaceOrAppendCondition(s.Conditions, *dt.DeepCopy())
	}
	all = append(append(all[:0], s.InitContainerStatuses...), s.ContainerStatuses...)
	s.Conditions = append(s.Conditions, readyToStartContainersCondition(pod, rs))
	s.Conditions = append(s.Conditions, initializedCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, PodReadyCondition(pod, s.Conditions, all, s.Phase))
	s.Conditions = append(s.Conditions, containersReadyCondition(pod, all, s.Phase))
	s.Conditions = append(s.Conditions, v1.PodCondition{Type: v1.PodScheduled, ObservedGeneration: pod.Generation, Status: v1.ConditionTrue})
	setTransitionTimes(&s, &old, now)

	// Host IPs; host-network pods share them as pod IPs.
	if len(nodeIPs) > 0 {
		host := sortPodIPs(nodeIPStrings, nodeIPs)
		s.HostIP = host[0]
		for _, ip := range host {
			s.HostIPs = append(s.HostIPs, v1.HostIP{IP: ip})
		}
		if pod.Spec.HostNetwork {
			if s.PodIP == "" {
				s.PodIP = host[0]
				s.PodIPs = []v1.PodIP{{IP: host[0]}}
			}
			if len(host) == 2 && len(s.PodIPs) == 1 && s.PodIPs[0].IP != host[1] {
				if a, err := netip.ParseAddr(s.PodIPs[0].IP); err == nil && a.Is4() != isIPv4(host[1]) {
					s.PodIPs = append(s.PodIPs, v1.PodIP{IP: host[1]})
				}
			}
		}
	}

	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		t := *old.StartTime
		s.StartTime = &t
	case pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero():
		t := *pod.Status.StartTime
		s.StartTime = &t
	default:
		t := metav1.NewTime(now)
		s.StartTime = &t
	}
	return s
}

// parseIPs parses the valid addresses of list, in order.
func parseIPs(list []string) []netip.Addr {
	var out []netip.Addr
	for _, s := range list {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Unmap().Is4()
}

// sortPodIPs picks from ips the first address of the preferred family
// (the family of the first node IP, IPv4 when there is none) and then the
// first of the other family, re-formatted in canonical form.
func sortPodIPs(ips []string, nodeIPs []netip.Addr) []string {
	primary4 := len(nodeIPs) == 0 || nodeIPs[0].Is4()
	addrs := parseIPs(ips)
	out := make([]string, 0, 2)
	for _, want4 := range []bool{primary4, !primary4} {
		for _, a := range addrs {
			if a.Is4() == want4 {
				out = append(out, a.String())
				break
			}
		}
	}
	return out
}

// converter turns the runtime statuses of one kind of container
// (regular, init or ephemeral) into API container statuses.
type converter struct {
	pod         *v1.Pod
	rs          *kubetypes.PodStatus
	reasons     ReasonSource
	runtimeName string
	hasInit     bool
}

func (c *converter) containerID(id string) string {
	if id == "" {
		return ""
	}
	return c.runtimeName + "://" + id
}

// instance converts one runtime container instance.
func (c *converter) instance(cs *kubetypes.ContainerStatus, old *v1.ContainerStatus, specImage string) v1.ContainerStatus {
	cid := c.containerID(cs.ID)
	st := v1.ContainerStatus{
		Name:         cs.Name,
		RestartCount: int32(cs.RestartCount),
		Image:        cs.Image,
		ImageID:      cs.ImageRef,
		ContainerID:  cid,
	}
	if st.Image == "" {
		st.Image = specImage
	}
	if st.ImageID == "" {
		st.ImageID = cs.ImageID
	}
	if old != nil {
		st.VolumeMounts = old.VolumeMounts
		if old.RestartCount > st.RestartCount {
			st.RestartCount = old.RestartCount
		}
		switch {
		case old.ContainerID != cid && old.State.Terminated != nil:
			st.LastTerminationState.Terminated = old.State.Terminated.DeepCopy()
		case old.LastTerminationState.Terminated != nil:
			st.LastTerminationState.Terminated = old.LastTerminationState.Terminated.DeepCopy()
		}
	}
	switch {
	case cs.State == kubetypes.ContainerStateRunning:
		st.State.Running = &v1.ContainerStateRunning{StartedAt: metaTime(cs.StartedAt)}
		// A started instance stays started (until the probes say otherwise).
		if old != nil && old.ContainerID == cid && old.Started != nil {
			v := *old.Started
			st.Started = &v
		}
	case cs.State == kubetypes.ContainerStateCreated:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	case cs.State == kubetypes.ContainerStateExited:
		st.State.Terminated = &v1.ContainerStateTerminated{
			ExitCode:    cs.ExitCode,
			Reason:      cs.Reason,
			Message:     cs.Message,
			StartedAt:   metaTime(cs.StartedAt),
			FinishedAt:  metaTime(cs.FinishedAt),
			ContainerID: cid,
		}
	case cs.State == kubetypes.ContainerStateUnknown && old != nil && old.State.Running != nil:
		// It ran and the runtime can no longer tell: it ended, we don't know how.
		st.State.Terminated = &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  terminatedUnknownMessage,
			ExitCode: 137,
		}
		st.RestartCount = old.RestartCount + 1
	default:
		st.State.Waiting = &v1.ContainerStateWaiting{}
	}
	return st
}

func metaTime(t time.Time) metav1.Time {
	if t.IsZero() {
		return metav1.Time{}
	}
	return metav1.NewTime(t)
}

// convert is the kubelet's convertToAPIContainerStatuses for one list of
// containers: previous statuses are the previous API statuses of the same kind.
func (c *converter) convert(previous []v1.ContainerStatus, containers []v1.Container, isInit bool) []v1.ContainerStatus {
	if len(containers) == 0 {
		return nil
	}
	oldByName := make(map[string]*v1.ContainerStatus, len(previous))
	for i := range previous {
		oldByName[previous[i].Name] = &previous[i]
	}
	defaultReason := ReasonContainerCreating
	if c.hasInit {
		defaultReason = ReasonPodInitializing
	}
	statuses := make(map[string]*v1.ContainerStatus, len(containers))
	for i := range containers {
		ct := &containers[i]
		st := &v1.ContainerStatus{Name: ct.Name, Image: ct.Image, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: defaultReason}}}
		if old, ok := oldByName[ct.Name]; ok {
			if old.State.Terminated != nil {
				st = old.DeepCopy()
			} else {
				st.RestartCount = old.RestartCount
				st.LastTerminationState = *old.LastTerminationState.DeepCopy()
			}
		}
		statuses[ct.Name] = st
	}

	// A container that was running and is gone from the runtime ran and
	// ended: record an unknown termination so it does not look never-started.
	for i := range containers {
		ct := &containers[i]
		if c.rs.FindContainerStatusByName(ct.Name) != nil {
			continue
		}
		old, ok := oldByName[ct.Name]
		if !ok || old.State.Terminated != nil || old.State.Running == nil {
			continue
		}
		st := statuses[ct.Name]
		if st.State.Waiting == nil || st.State.Waiting.Reason != defaultReason || st.LastTerminationState.Terminated != nil {
			continue
		}
		st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
			Reason:   ReasonContainerStatusUnknown,
			Message:  vanishedMessage,
			ExitCode: 137,
		}
		if c.pod.DeletionTimestamp == nil {
			st.RestartCount++
		}
	}

	// Newest instance is the state, the one before it the last termination.
	instances := make([]*kubetypes.ContainerStatus, 0, len(c.rs.ContainerStatuses))
	for _, cs := range c.rs.ContainerStatuses {
		if cs != nil {
			instances = append(instances, cs)
		}
	}
	sort.SliceStable(instances, func(i, j int) bool { return instances[i].CreatedAt.After(instances[j].CreatedAt) })
	seen := make(map[string]int, len(containers))
	specImage := make(map[string]string, len(containers))
	for i := range containers {
		specImage[containers[i].Name] = containers[i].Image
	}
	for _, cs := range instances {
		cur, ok := statuses[cs.Name]
		if !ok || seen[cs.Name] >= 2 {
			continue
		}
		st := c.instance(cs, oldByName[cs.Name], specImage[cs.Name])
		if seen[cs.Name] == 0 {
			statuses[cs.Name] = &st
		} else {
			cur.LastTerminationState = st.State
		}
		seen[cs.Name]++
	}

	// Containers that will be (re)started are waiting, with the reason of
	// their last failed start if there is one.
	for i := range containers {
		ct := &containers[i]
		st := statuses[ct.Name]
		latest := c.rs.FindContainerStatusByName(ct.Name)
		if isInit {
			if latest != nil && latest.State == kubetypes.ContainerStateExited && latest.ExitCode == 0 {
				continue
			}
			// An init container the runtime forgot, in a pod whose regular
			// containers exist, must have completed.
			if latest == nil && !isSidecar(ct) && st.State.Waiting != nil && anyRegularContainerCreated(c.pod, c.rs) {
				st.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
					Reason:   "Completed",
					Message:  "Unable to get init container status from container runtime and pod has been initialized, treat it as exited normally",
					ExitCode: 0,
				}}
				continue
			}
		}
		if !shouldRestart(ct, c.pod, latest) {
			continue
		}
		if c.reasons == nil {
			continue
		}
		reason, msg := c.reasons.Reason(c.pod.UID, ct.Name)
		if reason == "" {
			continue
		}
		if st.State.Terminated != nil {
			st.LastTerminationState = st.State
		}
		st.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
	}

	out := make([]v1.ContainerStatus, 0, len(statuses))
	if isInit {
		for i := range containers {
			out = append(out, *statuses[containers[i].Name])
		}
		return out
	}
	for _, st := range statuses {
		out = append(out, *st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// anyRegularContainerCreated reports whether the runtime holds an
// instance (created, running or exited) of a regular container.
func anyRegularContainerCreated(pod *v1.Pod, rs *kubetypes.PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := rs.FindContainerStatusByName(pod.Spec.Containers[i].Name)
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

// activeRegularContainerStarted reports whether a regular container
// exists in the pod's current sandbox, which proves the init containers
// have completed in it. Containers created before the newest sandbox belong
// to an earlier sandbox and do not count.
func activeRegularContainerStarted(pod *v1.Pod, rs *kubetypes.PodStatus) bool {
	var since int64
	if len(rs.SandboxStatuses) > 0 && rs.SandboxStatuses[0] != nil {
		since = rs.SandboxStatuses[0].GetCreatedAt()
	}
	for i := range pod.Spec.Containers {
		for _, cs := range rs.ContainerStatuses {
			if cs == nil || cs.Name != pod.Spec.Containers[i].Name {
				continue
			}
			if since == 0 || cs.CreatedAt.UnixNano() >= since {
				return true
			}
		}
	}
	return false
}

// shouldRestart reports whether the agent will (re)start a container
// whose newest instance is latest (nil: never created, or removed).
func shouldRestart(c *v1.Container, pod *v1.Pod, latest *kubetypes.ContainerStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if latest == nil {
		return true
	}
	switch latest.State {
	case kubetypes.ContainerStateRunning:
		return false
	case kubetypes.ContainerStateUnknown, kubetypes.ContainerStateCreated:
		return true
	}
	return containerShouldRestart(c, &pod.Spec, latest.ExitCode)
}

// containerShouldRestart applies the container's restart rules, then
// its own restart policy, then the pod's, to an exit code.
func containerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		for _, rule := range c.RestartPolicyRules {
			if rule.ExitCodes == nil {
				continue
			}
			in := false
			for _, v := range rule.ExitCodes.Values {
				if v == exitCode {
					in = true
				}
			}
			matched := (rule.ExitCodes.Operator == v1.ContainerRestartRuleOnExitCodesOpIn && in) ||
				(rule.ExitCodes.Operator == v1.ContainerRestartRuleOnExitCodesOpNotIn && !in)
			if !matched {
				continue
			}
			if rule.Action == v1.ContainerRestartRuleActionRestart || rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
				return true
			}
			break
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
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true
}

// applyProbes sets Started and Ready on every container status (the
// kubelet prober manager's UpdatePodStatus).
func applyProbes(pod *v1.Pod, s *v1.PodStatus, probes ProbeState) {
	specOf := func(list []v1.Container, name string) *v1.Container {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
		return nil
	}
	started := func(spec *v1.Container, st *v1.ContainerStatus) bool {
		if st.State.Running == nil {
			return false
		}
		if probes == nil {
			return true
		}
		if v, ok := probes.Startup(st.ContainerID); ok {
			return v
		}
		if st.Started != nil && *st.Started {
			return true
		}
		return spec == nil || spec.StartupProbe == nil
	}
	ready := func(spec *v1.Container, st *v1.ContainerStatus) bool {
		if st.State.Running == nil {
			return false
		}
		if probes == nil {
			return true
		}
		if v, ok := probes.Readiness(st.ContainerID); ok && v {
			return true
		}
		return spec == nil || spec.ReadinessProbe == nil
	}
	for i := range s.ContainerStatuses {
		st := &s.ContainerStatuses[i]
		spec := specOf(pod.Spec.Containers, st.Name)
		v := started(spec, st)
		st.Started = &v
		st.Ready = v && ready(spec, st)
	}
	for i := range s.InitContainerStatuses {
		st := &s.InitContainerStatuses[i]
		spec := specOf(pod.Spec.InitContainers, st.Name)
		v := started(spec, st)
		st.Started = &v
		if !isSidecar(spec) {
			st.Ready = st.State.Terminated != nil && st.State.Terminated.ExitCode == 0
			continue
		}
		st.Ready = v && ready(spec, st)
	}
}

// computePhase computes the pod phase from its container statuses (init and
// regular together) as the kubelet's getPhase does, container restart rules
// included. podIsTerminal: no container will be restarted any more.
// podHasInitialized: a regular container exists in the current sandbox.
func computePhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	spec := &pod.Spec
	pendingSidecars, pendingInit, failedInitNotRestartable := 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if isSidecar(c) {
			continue
		}
		st, ok := findContainerStatus(info, c.Name)
		if !ok {
			pendingInit++
			continue
		}
		switch {
		case st.State.Running != nil:
			pendingInit++
		case st.State.Terminated != nil:
			if code := st.State.Terminated.ExitCode; code != 0 && !containerShouldRestart(c, spec, code) {
				failedInitNotRestartable++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last != nil {
				if last.ExitCode != 0 && !containerShouldRestart(c, spec, last.ExitCode) {
					failedInitNotRestartable++
				}
			} else {
				pendingInit++
			}
		default:
			pendingInit++
		}
	}

	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded := 0, 0, 0, 0, 0, 0
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		st, ok := findContainerStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case st.State.Running != nil:
			if st.Started == nil || !*st.Started {
				pendingSidecars++
			}
			running++
		case st.State.Terminated != nil:
			// a stopped sidecar does not decide the phase
		case st.State.Waiting != nil:
			if st.LastTerminationState.Terminated == nil {
				pendingSidecars++
				waiting++
			}
		default:
			pendingSidecars++
			unknown++
		}
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		st, ok := findContainerStatus(info, c.Name)
		if !ok {
			unknown++
			continue
		}
		switch {
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			stopped++
			code := st.State.Terminated.ExitCode
			if !containerShouldRestart(c, spec, code) {
				stoppedNotRestartable++
			}
			if code == 0 {
				succeeded++
			}
		case st.State.Waiting != nil:
			if last := st.LastTerminationState.Terminated; last != nil {
				stopped++
				if !containerShouldRestart(c, spec, last.ExitCode) {
					stoppedNotRestartable++
				}
			} else {
				waiting++
			}
		default:
			unknown++
		}
	}

	if failedInitNotRestartable > 0 {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 || (pendingSidecars > 0 && !podHasInitialized), waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if podIsTerminal && !kubetypes.IsStaticPod(pod) {
			if stopped == succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if stopped != stoppedNotRestartable {
			return v1.PodRunning // some are restarting
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}

// qosClass is the pod's QoS class for its status (internal/qos).
func qosClass(pod *v1.Pod) v1.PodQOSClass { return qos.Class(pod) }
