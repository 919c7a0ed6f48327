package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ReasonUnexpectedAdmissionError is the admission reason of a pod whose
// devices could not be allocated (the kubelet's).
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// Admit allocates the devices of every container of pod (init containers
// first), as the kubelet does at admission. A pod that gets them all is
// admitted; otherwise nothing new stays allocated to it and it is rejected
// with the kubelet's reason UnexpectedAdmissionError and message "Allocate
// failed due to <why>, which is unexpected". Requests for resources no
// plugin has registered are ignored, as the kubelet does; a resource whose
// plugin went away past the grace period is reported as 0, and a pod
// asking for it is refused as the kubelet's resource fit does
// (OutOf<resource>). The devices
// of gone pods are freed by Reconcile and RemovePod.
func (m *Manager) Admit(pod *v1.Pod, _ []*v1.Pod) (ok bool, reason, message string) {
	if res, n, gone := m.requestsRemoved(pod); gone {
		// The Node reports the resource as 0: the kubelet's resource fit
		// refuses the pod.
		return false, "OutOf" + res, fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: 0, capacity: 0", res, n)
	}
	if !m.requestsDevices(pod) {
		return true, "", ""
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	if err := m.allocatePod(pod); err != nil {
		m.mAllocErrors.Inc()
		m.cfg.Logger.Info("pod rejected: devices not allocated", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
		return false, ReasonUnexpectedAdmissionError, fmt.Sprintf("Allocate failed due to %v, which is unexpected", unwrapAllocation(err))
	}
	m.mAllocations.Inc()
	return true, "", ""
}

// unwrapAllocation drops the package prefix from an allocation error so
// that the message reads as the kubelet's.
func unwrapAllocation(err error) error {
	var ae *allocErr
	if errors.As(err, &ae) {
		return ae.err
	}
	return err
}

// allocErr is an allocation failure: it matches ErrAllocation and prints
// only its cause.
type allocErr struct{ err error }

func (e *allocErr) Error() string        { return "devicemanager: allocation failed: " + e.err.Error() }
func (e *allocErr) Unwrap() []error      { return []error{ErrAllocation, e.err} }
func allocFail(f string, a ...any) error { return &allocErr{fmt.Errorf(f, a...)} }

// requestsRemoved returns a resource past its grace period that a
// container of pod asks for, with the pod's request for it.
func (m *Manager) requestsRemoved(pod *v1.Pod) (string, int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.removed) == 0 {
		return "", 0, false
	}
	var names []string
	total := map[string]int64{}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name, q := range cs[i].Resources.Limits {
				if res := string(name); m.removed[res] && q.Value() > 0 && total[res] == 0 {
					names = append(names, res)
					total[res] = podRequest(pod, name)
				}
			}
		}
	}
	if len(names) == 0 {
		return "", 0, false
	}
	sort.Strings(names)
	return names[0], total[names[0]], true
}

// podRequest is the pod's request of an extended resource: the larger of
// its app containers' sum and its largest init container's.
func podRequest(pod *v1.Pod, name v1.ResourceName) int64 {
	var sum, initMax int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Limits[name]
		sum += q.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		q := c.Resources.Limits[name]
		initMax = max(initMax, q.Value())
	}
	return max(sum, initMax)
}

// requestsDevices reports whether a container of pod has a limit on a
// resource a plugin serves (or the checkpoint holds).
func (m *Manager) requestsDevices(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			for name, q := range cs[i].Resources.Limits {
				if q.Value() > 0 && m.isDeviceResourceLocked(string(name)) {
					return true
				}
			}
		}
	}
	return false
}

func (m *Manager) isDeviceResourceLocked(res string) bool {
	if m.resources[res] != nil {
		return true
	}
	for _, ctrs := range m.alloc {
		for _, rs := range ctrs {
			if rs[res] != nil {
				return true
			}
		}
	}
	return false
}

// Reconcile frees the devices of pods that are gone: once the sources
// are ready (Start's sourcesReady), a pod holding devices that Start's
// activePods does not list in two passes in a row is forgotten and the
// checkpoint rewritten. (Two passes: a pod restored from the checkpoint
// may not be listed yet while the first pods are being admitted.) Run
// calls it every Config.ReconcilePeriod; RemovePod is the prompt way.
func (m *Manager) Reconcile() error {
	m.mu.Lock()
	activePods, sourcesReady := m.activePods, m.sourcesReady
	m.mu.Unlock()
	if activePods == nil || sourcesReady == nil || !sourcesReady() {
		return nil
	}
	active := map[string]bool{}
	for _, p := range activePods() {
		active[string(p.UID)] = true
	}
	m.admitMu.Lock()
	defer m.admitMu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	missing := map[string]bool{}
	var gone []string
	for uid := range m.alloc {
		if active[uid] {
			continue
		}
		if m.missing[uid] {
			gone = append(gone, uid)
		} else {
			missing[uid] = true
		}
	}
	m.missing = missing
	if len(gone) == 0 {
		return nil
	}
	sort.Strings(gone)
	for _, uid := range gone {
		delete(m.alloc, uid)
		m.cfg.Logger.Info("freeing the devices of a pod no longer active", zap.String("podUID", uid))
	}
	if err := m.persistLocked(); err != nil {
		return fmt.Errorf("devicemanager: write checkpoint: %w", err)
	}
	return nil
}

// allocatePod allocates every container's devices; on failure the pod's
// allocations are as they were before.
func (m *Manager) allocatePod(pod *v1.Pod) error {
	uid := string(pod.UID)
	m.mu.Lock()
	if !m.started {
		m.mu.Unlock()
		return ErrNotStarted
	}
	before := cloneContainers(m.alloc[uid])
	m.mu.Unlock()

	err := m.allocatePodContainers(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if before == nil {
			delete(m.alloc, uid)
		} else {
			m.alloc[uid] = before
		}
		return err
	}
	if !sameContainers(before, m.alloc[uid]) {
		if err := m.persistLocked(); err != nil {
			if before == nil {
				delete(m.alloc, uid)
			} else {
				m.alloc[uid] = before
			}
			return allocFail("failed to write checkpoint file %q: %v", StateFileName, err)
		}
	}
	return nil
}

func (m *Manager) allocatePodContainers(pod *v1.Pod) error {
	// reuse: devices of finished (non-restartable) init containers that
	// the next containers may take again.
	reuse := map[string][]string{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		got, err := m.allocateContainer(pod, c, reuse)
		if err != nil {
			return err
		}
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		for res, ids := range got {
			if sidecar {
				reuse[res] = without(reuse[res], ids)
			} else {
				reuse[res] = union(reuse[res], ids)
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		got, err := m.allocateContainer(pod, c, reuse)
		if err != nil {
			return err
		}
		for res, ids := range got {
			reuse[res] = without(reuse[res], ids)
		}
	}
	return nil
}

// allocateContainer allocates c's devices and returns them per resource.
func (m *Manager) allocateContainer(pod *v1.Pod, c *v1.Container, reuse map[string][]string) (map[string][]string, error) {
	uid := string(pod.UID)
	names := make([]string, 0, len(c.Resources.Limits))
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	got := map[string][]string{}
	for _, res := range names {
		q := c.Resources.Limits[v1.ResourceName(res)]
		need := int(q.Value())
		m.mu.Lock()
		isDev := m.isDeviceResourceLocked(res)
		m.mu.Unlock()
		if !isDev || need <= 0 {
			continue
		}
		ids, fresh, err := m.devicesToAllocate(pod, c.Name, res, need, reuse[res])
		if err != nil {
			return nil, err
		}
		got[res] = ids
		if !fresh {
			continue
		}
		if err := m.callAllocate(uid, c.Name, res, ids); err != nil {
			m.mu.Lock()
			delete(m.alloc[uid][c.Name], res)
			m.mu.Unlock()
			return nil, err
		}
	}
	return got, nil
}

// devicesToAllocate picks need devices of res for the container and
// records them (without a plugin response yet). fresh is false when the
// container already holds them.
func (m *Manager) devicesToAllocate(pod *v1.Pod, ctr, res string, need int, reusable []string) (ids []string, fresh bool, err error) {
	uid := string(pod.UID)
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[res]
	if a := m.alloc[uid][ctr][res]; a != nil {
		if len(a.ids) != need {
			return nil, false, allocFail("pod %q container %q changed request for resource %q from %d to %d", uid, ctr, res, len(a.ids), need)
		}
		if a.restored {
			// Restored from the checkpoint: the container may be running
			// with them; they stay its own whatever their health now.
			return a.ids, false, nil
		}
		if r == nil {
			return nil, false, allocFail("cannot allocate unregistered device %s", res)
		}
		for _, id := range a.ids {
			if d := r.devices[id]; d == nil || d.Health != pluginapi.Healthy {
				return nil, false, allocFail("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", res)
			}
		}
		return a.ids, false, nil
	}
	if r == nil {
		return nil, false, allocFail("cannot allocate unregistered device %s", res)
	}
	healthy := r.healthy()
	if len(healthy) == 0 {
		return nil, false, allocFail("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	inUse := m.inUseLocked(res)
	var chosen []string
	// Devices of the pod's finished init containers first.
	for _, id := range sorted(reusable) {
		if len(chosen) < need {
			chosen = append(chosen, id)
		}
	}
	if len(chosen) < need {
		var available []string
		for _, id := range healthy {
			if !inUse[id] {
				available = append(available, id)
			}
		}
		sort.Strings(available)
		missing := need - len(chosen)
		if len(available) < missing {
			return nil, false, allocFail("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, missing, len(available))
		}
		preferred := m.preferredLocked(r, res, available, chosen, need)
		chosen = take(chosen, need, available, preferred, numaBestFit(r, available, missing), available)
	}
	m.setAllocLocked(uid, ctr, res, &allocation{ids: chosen})
	return chosen, true, nil
}

// take fills chosen up to need from the lists in order, taking only
// devices in available.
func take(chosen []string, need int, available []string, lists ...[]string) []string {
	has := make(map[string]bool, need)
	for _, id := range chosen {
		has[id] = true
	}
	avail := make(map[string]bool, len(available))
	for _, id := range available {
		avail[id] = true
	}
	for _, list := range lists {
		for _, id := range list {
			if len(chosen) == need {
				return chosen
			}
			if avail[id] && !has[id] {
				has[id] = true
				chosen = append(chosen, id)
			}
		}
	}
	return chosen
}

// preferredLocked asks the plugin for its preferred devices when it
// offers that; nil otherwise or on error (logged: the kubelet then fails
// the allocation, here the manager's own choice is used). mu is released
// during the call.
func (m *Manager) preferredLocked(r *resourceState, res string, available, mustInclude []string, size int) []string {
	ep := r.ep
	if ep == nil || !ep.opts.GetGetPreferredAllocationAvailable() || m.runCtx == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(m.runCtx, m.cfg.CallTimeout)
	defer cancel()
	m.mu.Unlock()
	resp, err := ep.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs:   append(slices.Clone(mustInclude), available...),
			MustIncludeDeviceIDs: mustInclude,
			AllocationSize:       int32(size),
		}},
	})
	m.mu.Lock()
	if err != nil {
		m.cfg.Logger.Warn("GetPreferredAllocation failed; choosing devices without it", zap.String("resource", res), zap.Error(err))
		return nil
	}
	if cr := resp.GetContainerResponses(); len(cr) > 0 {
		return cr[0].GetDeviceIDs()
	}
	return nil
}

// callAllocate asks the plugin to allocate ids and records its response.
func (m *Manager) callAllocate(uid, ctr, res string, ids []string) error {
	m.mu.Lock()
	r, runCtx := m.resources[res], m.runCtx
	var ep *endpoint
	if r != nil {
		ep = r.ep
	}
	m.mu.Unlock()
	if ep == nil {
		return allocFail("unknown Device Plugin %s", res)
	}
	if runCtx == nil {
		return allocFail("%v", ErrNotRunning)
	}
	ctx, cancel := context.WithTimeout(runCtx, m.cfg.CallTimeout)
	defer cancel()
	resp, err := ep.client.Allocate(ctx, &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}},
	})
	if err != nil {
		return allocFail("device plugin Allocate rpc failed with err: %v", err)
	}
	if len(resp.GetContainerResponses()) == 0 {
		return allocFail("no containers return in allocation response %v", resp)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.alloc[uid][ctr][res]; a != nil {
		a.resp = resp.GetContainerResponses()[0]
	}
	return nil
}

// numaBestFit returns the available devices of the one NUMA node that
// holds at least need of them with the fewest to spare; nil when no node
// does (or the devices report no NUMA affinity).
func numaBestFit(r *resourceState, available []string, need int) []string {
	byNode := map[int64][]string{}
	for _, id := range available {
		if nodes := r.devices[id].GetTopology().GetNodes(); len(nodes) == 1 {
			byNode[nodes[0].GetID()] = append(byNode[nodes[0].GetID()], id)
		}
	}
	var best []string
	var bestNode int64
	for node, ids := range byNode {
		if len(ids) < need {
			continue
		}
		if best == nil || len(ids) < len(best) || len(ids) == len(best) && node < bestNode {
			best, bestNode = ids, node
		}
	}
	return best
}

func (m *Manager) setAllocLocked(uid, ctr, res string, a *allocation) {
	if m.alloc[uid] == nil {
		m.alloc[uid] = map[string]map[string]*allocation{}
	}
	if m.alloc[uid][ctr] == nil {
		m.alloc[uid][ctr] = map[string]*allocation{}
	}
	m.alloc[uid][ctr][res] = a
}

// inUseLocked is the set of devices of res allocated to any container.
func (m *Manager) inUseLocked(res string) map[string]bool {
	out := map[string]bool{}
	for _, ctrs := range m.alloc {
		for _, rs := range ctrs {
			if a := rs[res]; a != nil {
				for _, id := range a.ids {
					out[id] = true
				}
			}
		}
	}
	return out
}

// RemovePod frees every device of the pod (its containers have stopped)
// and writes the checkpoint.
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.alloc[podUID] == nil {
		return nil
	}
	delete(m.alloc, podUID)
	if err := m.persistLocked(); err != nil {
		return fmt.Errorf("devicemanager: write checkpoint: %w", err)
	}
	return nil
}

// ContainerDevices returns the devices allocated to a container, per
// resource (IDs sorted).
func (m *Manager) ContainerDevices(podUID, container string) map[string][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	rs := m.alloc[podUID][container]
	if len(rs) == 0 {
		return nil
	}
	out := make(map[string][]string, len(rs))
	for res, a := range rs {
		out[res] = sorted(a.ids)
	}
	return out
}

// ApplyContainerDevices puts the container's device allocation into its
// CRI config, as the kubelet's device run options: the plugins' envs
// (before the container's own, which win), mounts (before the volumes'),
// device nodes, annotations (the agent's own keys win) and CDI device
// names; repeats across resources are taken once. A plugin that asked for
// it gets PreStartContainer first. A container of an active pod with no
// allocation yet (admitted before its plugin registered) is allocated
// now. It satisfies kuberuntime.ContainerDevices.
func (m *Manager) ApplyContainerDevices(ctx context.Context, pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	uid := string(pod.UID)
	var wanted []string
	m.mu.Lock()
	for name, q := range c.Resources.Limits {
		if q.Value() > 0 && m.isDeviceResourceLocked(string(name)) {
			wanted = append(wanted, string(name))
		}
	}
	missing := false
	for _, res := range wanted {
		if m.alloc[uid][c.Name][res] == nil || m.alloc[uid][c.Name][res].resp == nil && !m.alloc[uid][c.Name][res].restored {
			missing = true
		}
	}
	m.mu.Unlock()
	if len(wanted) == 0 {
		return nil
	}
	sort.Strings(wanted)
	if missing {
		m.admitMu.Lock()
		err := m.allocatePod(pod)
		m.admitMu.Unlock()
		if err != nil {
			return fmt.Errorf("devicemanager: allocate for container %q: %w", c.Name, err)
		}
	}
	for _, res := range wanted {
		if err := m.preStart(ctx, uid, c.Name, res); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	applyResponses(cfg, m.alloc[uid][c.Name], wanted)
	return nil
}

func (m *Manager) preStart(ctx context.Context, uid, ctr, res string) error {
	m.mu.Lock()
	r := m.resources[res]
	a := m.alloc[uid][ctr][res]
	m.mu.Unlock()
	if r == nil || r.ep == nil {
		if a != nil && a.restored {
			return nil
		}
		return fmt.Errorf("%w: endpoint not found in cache for a registered resource: %s", ErrAllocation, res)
	}
	if !r.ep.opts.GetPreStartRequired() {
		return nil
	}
	if a == nil {
		return fmt.Errorf("%w: no devices found allocated in local cache for pod %s, container %s, resource %s", ErrAllocation, uid, ctr, res)
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	defer cancel()
	if _, err := r.ep.client.PreStartContainer(cctx, &pluginapi.PreStartContainerRequest{DevicesIds: a.ids}); err != nil {
		return fmt.Errorf("%w: device plugin PreStartContainer rpc failed with err: %v", ErrAllocation, err)
	}
	return nil
}

// applyResponses merges the allocate responses of resources (in order)
// into cfg.
func applyResponses(cfg *runtimeapi.ContainerConfig, rs map[string]*allocation, resources []string) {
	var envs []*runtimeapi.KeyValue
	var mounts []*runtimeapi.Mount
	seenEnv, seenMount, seenDev, seenCDI := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, res := range resources {
		a := rs[res]
		if a == nil || a.resp == nil {
			continue
		}
		resp := a.resp
		keys := make([]string, 0, len(resp.Envs))
		for k := range resp.Envs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !seenEnv[k] {
				seenEnv[k] = true
				envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(resp.Envs[k])})
			}
		}
		for _, mt := range resp.Mounts {
			if !seenMount[mt.ContainerPath] {
				seenMount[mt.ContainerPath] = true
				mounts = append(mounts, &runtimeapi.Mount{ContainerPath: mt.ContainerPath, HostPath: mt.HostPath, Readonly: mt.ReadOnly})
			}
		}
		for _, d := range resp.Devices {
			if !seenDev[d.ContainerPath] {
				seenDev[d.ContainerPath] = true
				cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: d.ContainerPath, HostPath: d.HostPath, Permissions: d.Permissions})
			}
		}
		for k, v := range resp.Annotations {
			if cfg.Annotations == nil {
				cfg.Annotations = map[string]string{}
			}
			if _, ok := cfg.Annotations[k]; !ok {
				cfg.Annotations[k] = v
			}
		}
		for _, d := range resp.CdiDevices {
			if d.GetName() != "" && !seenCDI[d.Name] {
				seenCDI[d.Name] = true
				cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: d.Name})
			}
		}
	}
	cfg.Envs = append(envs, cfg.Envs...)
	cfg.Mounts = append(mounts, cfg.Mounts...)
}

func cloneContainers(in map[string]map[string]*allocation) map[string]map[string]*allocation {
	if in == nil {
		return nil
	}
	out := make(map[string]map[string]*allocation, len(in))
	for c, rs := range in {
		out[c] = make(map[string]*allocation, len(rs))
		for r, a := range rs {
			cp := *a
			out[c][r] = &cp
		}
	}
	return out
}

func sameContainers(a, b map[string]map[string]*allocation) bool {
	if len(a) != len(b) {
		return false
	}
	for c, rs := range a {
		if len(rs) != len(b[c]) {
			return false
		}
		for r, x := range rs {
			y := b[c][r]
			if y == nil || !slices.Equal(x.ids, y.ids) || !proto.Equal(x.resp, y.resp) {
				return false
			}
		}
	}
	return true
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	sort.Strings(out)
	return out
}

func union(a, b []string) []string {
	for _, id := range b {
		if !slices.Contains(a, id) {
			a = append(a, id)
		}
	}
	return a
}

func without(a, b []string) []string {
	var out []string
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}
