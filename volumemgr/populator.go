package volumemgr

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodLister gives the pods the agent runs (the sync loop's pods: desired
// pods, admitted or not). syncloop's *Loop satisfies it.
type PodLister interface {
	Pods() []*v1.Pod
}

// PodStateProvider tells how far a pod's shutdown has gone. syncloop's
// *PodWorkers satisfies it.
type PodStateProvider interface {
	// ShouldPodContainersBeTerminating is true once the pod is stopping:
	// its volumes are not (re)added after the first populator pass.
	ShouldPodContainersBeTerminating(uid types.UID) bool
	// ShouldPodRuntimeBeRemoved is true once no container of the pod can
	// run any more: only then are its volumes removed from the desired
	// state (and so unmounted).
	ShouldPodRuntimeBeRemoved(uid types.UID) bool
}

// populator keeps the desired state in line with the pods.
type populator struct {
	m *Manager

	mu           sync.Mutex
	processed    map[types.UID]bool // false: seen, must be processed again
	hasAddedPods bool
}

func newPopulator(m *Manager) *populator {
	return &populator{m: m, processed: map[types.UID]bool{}}
}

// HasAddedPods reports whether a populator pass that began with every pod
// source ready has completed: only then does the reconciler unmount
// volumes that are not desired.
func (m *Manager) HasAddedPods() bool {
	m.pop.mu.Lock()
	defer m.pop.mu.Unlock()
	return m.pop.hasAddedPods
}

// ReprocessPod makes the next populator pass process the pod's volumes
// again, which marks its configMap, secret, projected and downwardAPI
// volumes for a remount (the content is projected again).
func (m *Manager) ReprocessPod(uid types.UID) {
	m.pop.mu.Lock()
	defer m.pop.mu.Unlock()
	m.pop.processed[uid] = false
}

// PopulateOnce is one populator pass: it adds the volumes of the pods from
// the PodLister to the desired state (skipping, after the first complete
// pass, pods that are terminating, and, before it, pods whose runtime is
// already gone), and removes the pods whose runtime may be removed. Once a
// pass that began with the sources ready has ended, HasAddedPods is true.
// Without a pod source it does nothing.
func (m *Manager) PopulateOnce(ctx context.Context) {
	src := m.source()
	if src == nil {
		return
	}
	p := m.pop
	ready := src.sourcesReady()
	pods := src.pods.Pods()
	byUID := make(map[types.UID]*v1.Pod, len(pods))

	p.mu.Lock()
	hasAdded := p.hasAddedPods
	p.mu.Unlock()
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		byUID[pod.UID] = pod
		if hasAdded && src.terminating(pod.UID) {
			continue
		}
		if !hasAdded && src.runtimeRemoved(pod.UID, byUID) {
			continue
		}
		p.processPod(ctx, pod)
	}
	p.removeDeleted(src, byUID)

	if ready {
		p.mu.Lock()
		if !p.hasAddedPods {
			m.log.Info("desired state populated with every source ready")
		}
		p.hasAddedPods = true
		p.mu.Unlock()
	}
}

// processPod adds the pod's mounted volumes to the desired state unless it
// was processed already.
func (p *populator) processPod(_ context.Context, pod *v1.Pod) {
	m := p.m
	p.mu.Lock()
	done, seen := p.processed[pod.UID]
	p.mu.Unlock()
	if done {
		return
	}
	all := true
	if err := ValidateSegment(string(pod.UID)); err != nil {
		m.dsw.addError(pod.UID, fmt.Sprintf("pod UID: %v", err))
		all = false
	} else {
		used := usedVolumeNames(pod)
		for i := range pod.Spec.Volumes {
			vol := &pod.Spec.Volumes[i]
			if _, ok := used[vol.Name]; !ok {
				continue
			}
			dv, err := m.desiredVolumeFor(pod, vol)
			if err != nil {
				m.log.Warn("volume not processed", zap.String("pod", pod.Namespace+"/"+pod.Name),
					zap.String("volume", vol.Name), zap.Error(err))
				m.dsw.addError(pod.UID, err.Error())
				all = false
				continue
			}
			m.dsw.addPodVolume(pod, dv)
		}
	}
	switch {
	case all:
		p.mu.Lock()
		p.processed[pod.UID] = true
		p.mu.Unlock()
		m.asw.markRemountRequired(pod.UID)
		m.dsw.popErrors(pod.UID)
		m.notify()
	case seen:
		// Processed at least once before: don't retry every pass; the
		// next ReprocessPod (the pod's next sync) tries again.
		p.mu.Lock()
		p.processed[pod.UID] = true
		p.mu.Unlock()
		m.notify()
	default:
		// Never processed completely: the next pass tries again.
		m.notify()
	}
}

// removeDeleted drops from the desired state the pods whose runtime may be
// removed, and forgets processing marks and errors of pods that are gone.
func (p *populator) removeDeleted(src *podSource, byUID map[types.UID]*v1.Pod) {
	m := p.m
	for _, uid := range m.dsw.podUIDs() {
		if !src.runtimeRemoved(uid, byUID) {
			continue
		}
		m.dsw.deletePod(uid)
		p.mu.Lock()
		delete(p.processed, uid)
		p.mu.Unlock()
		m.notify()
	}
	p.mu.Lock()
	for uid := range p.processed {
		if _, ok := byUID[uid]; !ok && !m.dsw.hasPod(uid) && src.runtimeRemoved(uid, byUID) {
			delete(p.processed, uid)
		}
	}
	p.mu.Unlock()
	for _, uid := range m.dsw.podsWithErrors() {
		if _, ok := byUID[uid]; !ok {
			m.dsw.popErrors(uid)
		}
	}
}

// desiredVolumeFor checks the volume and finds its plugin.
func (m *Manager) desiredVolumeFor(pod *v1.Pod, vol *v1.Volume) (*desiredVolume, error) {
	if err := ValidateSegment(vol.Name); err != nil {
		return nil, fmt.Errorf("volume name: %w", err)
	}
	plugin, err := FindPlugin(m.plugins, vol)
	if err != nil {
		return nil, err
	}
	escaped := EscapePluginName(plugin.Name())
	return &desiredVolume{
		uniqueName: plugin.Name() + "/" + string(pod.UID) + "-" + vol.Name,
		name:       vol.Name,
		pod:        pod,
		vol:        vol,
		plugin:     plugin,
		dir:        filepath.Join(m.cfg.PodsDir, string(pod.UID), "volumes", escaped, vol.Name),
	}, nil
}

// usedVolumeNames returns the names of the volumes some container (init,
// regular or ephemeral) mounts or uses as a device.
func usedVolumeNames(pod *v1.Pod) map[string]struct{} {
	out := map[string]struct{}{}
	add := func(mounts []v1.VolumeMount, devices []v1.VolumeDevice) {
		for _, vm := range mounts {
			out[vm.Name] = struct{}{}
		}
		for _, vd := range devices {
			out[vd.Name] = struct{}{}
		}
	}
	for i := range pod.Spec.InitContainers {
		add(pod.Spec.InitContainers[i].VolumeMounts, pod.Spec.InitContainers[i].VolumeDevices)
	}
	for i := range pod.Spec.Containers {
		add(pod.Spec.Containers[i].VolumeMounts, pod.Spec.Containers[i].VolumeDevices)
	}
	for i := range pod.Spec.EphemeralContainers {
		c := &pod.Spec.EphemeralContainers[i].EphemeralContainerCommon
		add(c.VolumeMounts, c.VolumeDevices)
	}
	return out
}
