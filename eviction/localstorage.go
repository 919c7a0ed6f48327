package eviction

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// The messages of local storage evictions, as the kubelet's.
const (
	emptyDirMessageFmt                  = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralStorageMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralStorageMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
)

// The kubelet_evictions labels of local storage evictions (the kubelet's).
const (
	signalEmptyDirFsLimit           = "emptydirfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// LocalStorageGracePeriodSeconds is the grace a pod evicted for exceeding
// a local storage limit gets (the kubelet's immediate eviction).
const LocalStorageGracePeriodSeconds = 1

// localStorageEviction evicts, as the kubelet's localStorageEviction does,
// every active pod with stats that exceeds one of its local storage limits,
// checked in this order (the first exceeded one names the eviction):
//   - an emptyDir volume's use above its sizeLimit;
//   - the pod's use (writable layers, logs and local volumes) above the
//     pod's ephemeral-storage limit (the pod-level limit, else the sum of
//     its containers' as the API computes pod limits);
//   - a container's logs, plus its writable layer unless images (and so
//     writable layers) have a file system of their own, above the
//     container's ephemeral-storage limit.
//
// Critical pods are never evicted. The pods evicted are returned.
func (m *Manager) localStorageEviction(ctx context.Context, pods []*v1.Pod, stats map[types.UID]*PodStats, dedicatedImageFs bool) []*v1.Pod {
	var evicted []*v1.Pod
	for _, pod := range pods {
		st, ok := stats[pod.UID]
		if !ok || st == nil {
			continue
		}
		msg, signal := localStorageViolation(pod, st, dedicatedImageFs)
		if msg == "" {
			continue
		}
		if kubetypes.IsCriticalPod(pod) {
			m.log.Info("cannot evict a critical pod over its local storage limit", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("message", msg))
			continue
		}
		m.log.Info("evicting pod over its local storage limit", zap.String("pod", pod.Namespace+"/"+pod.Name),
			zap.String("signal", signal), zap.String("message", msg))
		status := v1.PodStatus{Phase: v1.PodFailed, Reason: Reason, Message: msg}
		m.rec().Event(pod, v1.EventTypeWarning, kubetypes.ReasonEvicted, msg)
		if err := m.cfg.KillPod(ctx, pod, status, LocalStorageGracePeriodSeconds); err != nil {
			m.log.Error("pod failed to evict", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
		}
		if m.evictions != nil {
			m.evictions.WithLabelValues(signal).Inc()
		}
		evicted = append(evicted, pod)
	}
	return evicted
}

// localStorageViolation returns the eviction message and metric label of
// the first local storage limit pod exceeds; "" when none.
func localStorageViolation(pod *v1.Pod, st *PodStats, dedicatedImageFs bool) (string, string) {
	used := make(map[string]uint64, len(st.Volumes))
	measured := make(map[string]bool, len(st.Volumes))
	for _, v := range st.Volumes {
		used[v.Name], measured[v.Name] = v.UsedBytes, true
	}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.EmptyDir == nil || vol.EmptyDir.SizeLimit == nil || vol.EmptyDir.SizeLimit.Sign() <= 0 || !measured[vol.Name] {
			continue
		}
		limit := vol.EmptyDir.SizeLimit
		if resource.NewQuantity(int64(min(used[vol.Name], 1<<62)), resource.BinarySI).Cmp(*limit) > 0 {
			return fmt.Sprintf(emptyDirMessageFmt, vol.Name, limit.String()), signalEmptyDirFsLimit
		}
	}
	if limit, ok := podEphemeralStorageLimit(pod); ok {
		total := st.RootfsBytes + st.LogsBytes + st.VolumeBytes
		if resource.NewQuantity(int64(min(total, 1<<62)), resource.BinarySI).Cmp(limit) > 0 {
			return fmt.Sprintf(podEphemeralStorageMessageFmt, limit.String()), signalEphemeralPodFsLimit
		}
	}
	limits := make(map[string]resource.Quantity, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok && q.Value() != 0 {
			limits[c.Name] = q
		}
	}
	for _, cs := range st.Containers {
		limit, ok := limits[cs.Name]
		if !ok {
			continue
		}
		use := cs.LogsBytes
		if !dedicatedImageFs {
			use += cs.RootfsBytes
		}
		if limit.Cmp(*resource.NewQuantity(int64(min(use, 1<<62)), resource.BinarySI)) < 0 {
			return fmt.Sprintf(containerEphemeralStorageMessageFmt, cs.Name, limit.String()), signalEphemeralContainerFsLimit
		}
	}
	return "", ""
}

// podEphemeralStorageLimit is the pod's ephemeral-storage limit as the API
// computes pod limits: the pod-level limit when set; else the sum of the
// regular and sidecar containers' limits, or, when larger, an init
// container's limit plus the sidecars started before it. ok is false when
// no container has the limit.
func podEphemeralStorageLimit(pod *v1.Pod) (resource.Quantity, bool) {
	if r := pod.Spec.Resources; r != nil {
		if q, ok := r.Limits[v1.ResourceEphemeralStorage]; ok {
			return q, true
		}
	}
	var sum, sidecars, maxInit resource.Quantity
	found := false
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]; ok {
			sum.Add(q)
			found = true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		q, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if ok {
			found = true
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			if ok {
				sidecars.Add(q)
			}
			continue
		}
		if ok {
			t := q.DeepCopy()
			t.Add(sidecars)
			if t.Cmp(maxInit) > 0 {
				maxInit = t
			}
		}
	}
	if !found {
		return resource.Quantity{}, false
	}
	sum.Add(sidecars)
	if maxInit.Cmp(sum) > 0 {
		sum = maxInit
	}
	return sum, true
}
