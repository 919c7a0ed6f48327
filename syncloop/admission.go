package syncloop

import (
	"fmt"
	"sort"

	"github.com/nodekit/nodekit/podstatus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Admission reasons of the built-in checks (the kubelet's strings).
const (
	// ReasonOutOfCPU, ReasonOutOfMemory, ReasonOutOfEphemeralStorage and
	// ReasonOutOfPods: the pod's requests don't fit the node's allocatable
	// resources. Other resources give "OutOf<resource name>".
	ReasonOutOfCPU              = "OutOfcpu"
	ReasonOutOfMemory           = "OutOfmemory"
	ReasonOutOfEphemeralStorage = "OutOfephemeral-storage"
	ReasonOutOfPods             = "OutOfpods"
	// ReasonNodePorts: a host port of the pod is already used by an active pod.
	ReasonNodePorts = "NodePorts"
	// RejectedMessagePrefix starts the status message of a rejected pod.
	RejectedMessagePrefix = "Pod was rejected: "
)

// AdmitResult is the verdict of an AdmitHandler.
type AdmitResult struct {
	Admit bool
	// Reason is a short CamelCase reason (the pod status' reason); Message
	// says why in words.
	Reason  string
	Message string
}

// AdmitHandler decides whether a new pod may run on the node, given the
// pods that are active there (running or about to; the new pod is not among
// them). Admit is called from the loop's goroutine, one pod at a time.
type AdmitHandler interface {
	Admit(pod *v1.Pod, activePods []*v1.Pod) AdmitResult
}

// AdmitFunc adapts a function to AdmitHandler.
type AdmitFunc func(pod *v1.Pod, activePods []*v1.Pod) AdmitResult

// Admit calls f.
func (f AdmitFunc) Admit(pod *v1.Pod, activePods []*v1.Pod) AdmitResult { return f(pod, activePods) }

// resourceFitAdmitter rejects a pod whose requests, added to those of the
// active pods, exceed the node's allocatable resources. Only resources the
// allocatable list names are checked (extended resources the node lacks
// are ignored, as the kubelet does); the pod count is checked when it names
// "pods".
type resourceFitAdmitter struct {
	allocatable func() v1.ResourceList
}

// insufficient is one resource that does not fit.
type insufficient struct {
	name                      v1.ResourceName
	requested, used, capacity int64
}

func (r *resourceFitAdmitter) Admit(pod *v1.Pod, active []*v1.Pod) AdmitResult {
	if r.allocatable == nil {
		return AdmitResult{Admit: true}
	}
	alloc := r.allocatable()
	if len(alloc) == 0 {
		return AdmitResult{Admit: true}
	}
	misses := fitResources(pod, active, alloc)
	if len(misses) == 0 {
		return AdmitResult{Admit: true}
	}
	return misses[0].result()
}

// result is the rejection for a resource that does not fit.
func (m insufficient) result() AdmitResult {
	return AdmitResult{
		Reason: "OutOf" + string(m.name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			m.name, m.requested, m.used, m.capacity),
	}
}

// fitResources returns the resources that don't fit, pods first, then
// cpu, memory, ephemeral-storage, then the others by name.
func fitResources(pod *v1.Pod, active []*v1.Pod, alloc v1.ResourceList) []insufficient {
	used := make(map[v1.ResourceName]int64)
	for _, p := range active {
		for name, v := range podRequests(p) {
			used[name] += v
		}
	}
	return fitUsed(pod, int64(len(active)), used, alloc)
}

// fitUsed is fitResources given the number of active pods and their
// summed requests.
func fitUsed(pod *v1.Pod, nActive int64, used map[v1.ResourceName]int64, alloc v1.ResourceList) []insufficient {
	var out []insufficient
	if q, ok := alloc[v1.ResourcePods]; ok {
		if n := nActive; n+1 > q.Value() {
			out = append(out, insufficient{v1.ResourcePods, 1, n, q.Value()})
		}
	}
	req := podRequests(pod)
	if len(req) == 0 {
		return out
	}
	names := make([]v1.ResourceName, 0, len(req))
	for name := range req {
		names = append(names, name)
	}
	order := map[v1.ResourceName]int{v1.ResourceCPU: 0, v1.ResourceMemory: 1, v1.ResourceEphemeralStorage: 2}
	sort.Slice(names, func(i, j int) bool {
		oi, iok := order[names[i]]
		oj, jok := order[names[j]]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		if name == v1.ResourcePods || req[name] <= 0 {
			continue
		}
		q, ok := alloc[name]
		if !ok {
			continue
		}
		capacity := quantityValue(name, q)
		if req[name] > capacity-used[name] {
			out = append(out, insufficient{name, req[name], used[name], capacity})
		}
	}
	return out
}

// quantityValue is q in the unit the checks use: millicores for cpu,
// whole units otherwise.
func quantityValue(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// podRequests is the effective request of a pod per resource (cpu in
// millicores): the larger of the regular containers plus sidecars and the
// largest init container step (an init container with the sidecars started
// before it), plus the pod overhead. Pod-level requests replace the
// container sum for the resources they name.
func podRequests(pod *v1.Pod) map[v1.ResourceName]int64 {
	sum := make(map[v1.ResourceName]int64)
	add := func(dst map[v1.ResourceName]int64, list v1.ResourceList) {
		for name, q := range list {
			dst[name] += quantityValue(name, q)
		}
	}
	for i := range pod.Spec.Containers {
		add(sum, pod.Spec.Containers[i].Resources.Requests)
	}
	sidecars := make(map[v1.ResourceName]int64)
	initMax := make(map[v1.ResourceName]int64)
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		step := make(map[v1.ResourceName]int64)
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(sidecars, c.Resources.Requests)
			add(sum, c.Resources.Requests)
			for n, v := range sidecars {
				step[n] = v
			}
		} else {
			add(step, c.Resources.Requests)
			for n, v := range sidecars {
				step[n] += v
			}
		}
		for n, v := range step {
			initMax[n] = max(initMax[n], v)
		}
	}
	for n, v := range initMax {
		sum[n] = max(sum[n], v)
	}
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			sum[name] = quantityValue(name, q)
		}
	}
	add(sum, pod.Spec.Overhead)
	for n, v := range sum {
		if v == 0 {
			delete(sum, n)
		}
	}
	return sum
}

// hostPortAdmitter rejects a pod that asks for a host port (protocol, IP)
// an active pod already holds. 0.0.0.0 (or no IP) conflicts with every IP.
type hostPortAdmitter struct{}

type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

func (hostPortAdmitter) Admit(pod *v1.Pod, active []*v1.Pod) AdmitResult {
	want := podHostPorts(pod)
	if len(want) == 0 {
		return AdmitResult{Admit: true}
	}
	for _, other := range active {
		if other == nil || other.UID == pod.UID {
			continue
		}
		for _, a := range podHostPorts(other) {
			for _, b := range want {
				if a.port == b.port && a.protocol == b.protocol && (a.ip == b.ip || a.ip == "0.0.0.0" || b.ip == "0.0.0.0") {
					return AdmitResult{
						Reason:  ReasonNodePorts,
						Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
					}
				}
			}
		}
	}
	return AdmitResult{Admit: true}
}

// podHostPorts lists the host ports of a pod's containers and sidecars.
func podHostPorts(pod *v1.Pod) []hostPort {
	var out []hostPort
	add := func(c *v1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" || hp.ip == "::" {
				hp.ip = "0.0.0.0"
			}
			if hp.protocol == "" {
				hp.protocol = v1.ProtocolTCP
			}
			out = append(out, hp)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

// activePodsExcept returns the known pods that run or may run (not known
// terminated, not terminal unless their termination is still underway),
// except uid.
func (l *Loop) activePodsExcept(uid types.UID) []*v1.Pod {
	pods := l.Pods()
	out := pods[:0]
	for _, p := range pods {
		if p.UID == uid || !l.isActive(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// isActive: the pod is not known to be stopped, and not terminal unless the
// pod workers still stop it.
func (l *Loop) isActive(p *v1.Pod) bool {
	if l.workers.IsPodKnownTerminated(p.UID) {
		return false
	}
	return !l.isAdmittedPodTerminal(p) || l.workers.IsPodTerminationRequested(p.UID)
}

// isAdmittedPodTerminal: the API or the status manager has the pod in a
// terminal phase.
func (l *Loop) isAdmittedPodTerminal(p *v1.Pod) bool {
	if podstatus.IsTerminalPhase(p.Status.Phase) {
		return true
	}
	if phase, ok := l.status.PodPhase(p.UID); ok && podstatus.IsTerminalPhase(phase) {
		return true
	}
	return false
}

// admission admits the pods of one HandlePodAdditions call. It takes the
// active pods once, when the batch begins (O(n log n) for n known pods),
// and then keeps them and the built-in checks' running totals (requests
// per resource, host ports held) as pods are added, so each admission
// costs the new pod's size, not the node's: admitting n pods is
// O(n log n) overall instead of a re-listing and re-sorting of every pod
// for each one. Handlers other than the built-in ones still get the
// active pods as a slice.
type admission struct {
	l      *Loop
	active []*v1.Pod
	// requests are the summed requests of active (cpu in millicores).
	requests map[v1.ResourceName]int64
	// ports counts the active pods' host ports by (ip, protocol, port);
	// anyIP counts them by (protocol, port) whatever the IP.
	ports map[hostPort]int
	anyIP map[hostPort]int
}

// beginAdmission snapshots the active pods, leaving out the UIDs of batch
// (they are admitted one by one).
func (l *Loop) beginAdmission(batch []*v1.Pod) *admission {
	skip := make(map[types.UID]struct{}, len(batch))
	for _, p := range batch {
		if p != nil {
			skip[p.UID] = struct{}{}
		}
	}
	a := &admission{l: l, requests: map[v1.ResourceName]int64{}, ports: map[hostPort]int{}, anyIP: map[hostPort]int{}}
	for _, p := range l.activePodsExcept("") {
		if _, ok := skip[p.UID]; ok {
			continue
		}
		a.count(p)
	}
	return a
}

// count adds p to the active pods and the running totals.
func (a *admission) count(p *v1.Pod) {
	a.active = append(a.active, p)
	for name, v := range podRequests(p) {
		a.requests[name] += v
	}
	for _, hp := range podHostPorts(p) {
		a.ports[hp]++
		a.anyIP[hostPort{protocol: hp.protocol, port: hp.port}]++
	}
}

// add counts pod as active for the rest of the batch when it is (admitted
// and not terminal, or still being stopped).
func (a *admission) add(pod *v1.Pod) {
	if a.l.isActive(pod) {
		a.count(pod)
	}
}

// admit runs every admit handler for pod against the batch's active pods;
// the first rejection wins. The built-in checks use the running totals.
func (a *admission) admit(pod *v1.Pod) AdmitResult {
	for _, h := range a.l.admit {
		var r AdmitResult
		switch h := h.(type) {
		case *resourceFitAdmitter:
			r = h.admitWith(pod, int64(len(a.active)), a.requests)
		case hostPortAdmitter:
			r = a.admitPorts(pod)
		default:
			r = h.Admit(pod, a.active)
		}
		if !r.Admit {
			if r.Reason == "" {
				r.Reason = "UnknownReason"
			}
			return r
		}
	}
	return AdmitResult{Admit: true}
}

// admitWith is Admit with the active pods' count and summed requests.
func (r *resourceFitAdmitter) admitWith(pod *v1.Pod, nActive int64, used map[v1.ResourceName]int64) AdmitResult {
	if r.allocatable == nil {
		return AdmitResult{Admit: true}
	}
	alloc := r.allocatable()
	if len(alloc) == 0 {
		return AdmitResult{Admit: true}
	}
	misses := fitUsed(pod, nActive, used, alloc)
	if len(misses) == 0 {
		return AdmitResult{Admit: true}
	}
	return misses[0].result()
}

// admitPorts is hostPortAdmitter.Admit against the running port counts.
func (a *admission) admitPorts(pod *v1.Pod) AdmitResult {
	for _, b := range podHostPorts(pod) {
		conflict := a.ports[b] > 0 || a.ports[hostPort{ip: "0.0.0.0", protocol: b.protocol, port: b.port}] > 0
		if b.ip == "0.0.0.0" {
			conflict = conflict || a.anyIP[hostPort{protocol: b.protocol, port: b.port}] > 0
		}
		if conflict {
			return AdmitResult{
				Reason:  ReasonNodePorts,
				Message: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports",
			}
		}
	}
	return AdmitResult{Admit: true}
}
