package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
)

// PodStatusSinkConfig configures a PodStatusSink.
type PodStatusSinkConfig struct {
	// Client talks to the API server with the node's credential (required).
	Client kubernetes.Interface
	// MaxCachedStatuses bounds the cache of statuses last sent (used to
	// skip unchanged ones); when full it is emptied, which costs one extra
	// read per pod. 0 = DefaultMaxCachedStatuses.
	MaxCachedStatuses int
	Logger            *zap.Logger
}

// DefaultMaxCachedStatuses is the default PodStatusSinkConfig.MaxCachedStatuses.
const DefaultMaxCachedStatuses = 4096

// PodStatusSink is the podstatus.Sink (and PodDeleter) of a
// Kubernetes API server: it patches the status subresource of the pod with
// a strategic merge patch that carries the pod's UID as a precondition,
// reports a static pod's status on its mirror pod, and deletes finished
// pods with grace 0 and a UID precondition.
//
// A status equal to the one last sent for the same pod is not sent again.
// A status that would move a pod out of a terminal phase in the API server
// is not sent (the StatusManager never produces one; this is a last guard).
type PodStatusSink struct {
	cfg PodStatusSinkConfig
	log *zap.Logger

	mu   sync.Mutex
	sent map[types.UID]v1.PodStatus // by the UID of the API object patched
}

var (
	_ podstatus.Sink       = (*PodStatusSink)(nil)
	_ podstatus.PodDeleter = (*PodStatusSink)(nil)
)

// NewPodStatusSink validates cfg. It does no I/O.
func NewPodStatusSink(cfg PodStatusSinkConfig) (*PodStatusSink, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.MaxCachedStatuses < 0 {
		errs = append(errs, fmt.Errorf("%w: MaxCachedStatuses must not be negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.MaxCachedStatuses == 0 {
		cfg.MaxCachedStatuses = DefaultMaxCachedStatuses
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &PodStatusSink{cfg: cfg, log: cfg.Logger.Named("podstatus.apiserver"), sent: make(map[types.UID]v1.PodStatus)}, nil
}

// isMirrorOf reports whether mirror is the current mirror pod of the static pod.
func isMirrorOf(mirror, static *v1.Pod) bool {
	hash, ok := mirror.Annotations[kubetypes.ConfigMirrorAnnotation]
	return ok && hash == static.Annotations[kubetypes.ConfigHashAnnotation] && mirror.DeletionTimestamp == nil
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// SyncPodStatus implements podstatus.Sink. A pod that no longer exists
// in the API server (or exists with another UID) is skipped without error.
// A static pod without a current mirror pod fails with ErrNoMirrorPod, so
// the StatusManager offers its status again later.
func (s *PodStatusSink) SyncPodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	if pod == nil {
		return fmt.Errorf("%w: nil pod", ErrInvalidPod)
	}
	if kubetypes.IsMirrorPod(pod) {
		return nil // the agent never reports on a mirror pod directly
	}
	pods := s.cfg.Client.CoreV1().Pods(pod.Namespace)
	uid := pod.UID
	static := kubetypes.IsStaticPod(pod)
	if !static {
		s.mu.Lock()
		last, ok := s.sent[uid]
		s.mu.Unlock()
		if ok && equality.Semantic.DeepEqual(&last, &status) {
			return nil
		}
	}
	cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if static {
			return fmt.Errorf("%w: %s/%s", ErrNoMirrorPod, pod.Namespace, pod.Name)
		}
		s.forget(uid)
		return nil
	case err != nil:
		return fmt.Errorf("reading pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if static {
		if !isMirrorOf(cur, pod) {
			return fmt.Errorf("%w: %s/%s", ErrNoMirrorPod, pod.Namespace, pod.Name)
		}
		uid = cur.UID
		status = keepMirrorTimes(status, &cur.Status)
	} else if cur.UID != uid {
		s.log.Debug("pod replaced in the API server; status dropped", zap.String("pod", pod.Namespace+"/"+pod.Name))
		s.forget(uid)
		return nil
	}
	if isTerminal(cur.Status.Phase) && !isTerminal(status.Phase) {
		s.log.Info("status would leave a terminal phase; not sent", zap.String("pod", pod.Namespace+"/"+pod.Name),
			zap.String("api", string(cur.Status.Phase)), zap.String("agent", string(status.Phase)))
		return nil
	}
	s.mu.Lock()
	last, ok := s.sent[uid]
	s.mu.Unlock()
	if ok && equality.Semantic.DeepEqual(&last, &status) && equality.Semantic.DeepEqual(&cur.Status, &status) {
		return nil
	}
	patch, err := statusPatch(uid, &cur.Status, &status)
	if err != nil {
		return err
	}
	if patch != nil {
		if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				// Gone or replaced (UID precondition) since the read.
				s.forget(uid)
				if static {
					return fmt.Errorf("%w: %s/%s: %w", ErrNoMirrorPod, pod.Namespace, pod.Name, err)
				}
				return nil
			}
			return fmt.Errorf("patching status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	s.mu.Lock()
	if len(s.sent) >= s.cfg.MaxCachedStatuses {
		// Entries of pods that went away without DeletePod are never
		// looked up again; dropping them all costs one extra read each.
		clear(s.sent)
	}
	s.sent[uid] = *status.DeepCopy()
	s.mu.Unlock()
	return nil
}

// keepMirrorTimes returns status with the times the mirror pod's status
// (the API server's view of the same static pod) already has: its
// StartTime, and the transition times of the conditions whose status did
// not change. The kubelet's status manager takes a static pod's previous
// status from its mirror pod when it has none cached, so a restart of the
// agent (which starts with no cached statuses) does not move a static
// pod's start time or its conditions' transition times.
func keepMirrorTimes(status v1.PodStatus, mirror *v1.PodStatus) v1.PodStatus {
	if mirror.StartTime != nil && !mirror.StartTime.IsZero() {
		t := *mirror.StartTime
		status.StartTime = &t
	}
	if len(status.Conditions) == 0 || len(mirror.Conditions) == 0 {
		return status
	}
	conds := make([]v1.PodCondition, len(status.Conditions))
	copy(conds, status.Conditions)
	for i := range conds {
		for _, m := range mirror.Conditions {
			if m.Type == conds[i].Type && m.Status == conds[i].Status && !m.LastTransitionTime.IsZero() {
				conds[i].LastTransitionTime = m.LastTransitionTime
			}
		}
	}
	status.Conditions = conds
	return status
}

// statusPatch is the strategic merge patch from old to next, with the UID
// as a precondition; nil when nothing changes.
func statusPatch(uid types.UID, old, next *v1.PodStatus) ([]byte, error) {
	type obj struct {
		Metadata struct {
			UID types.UID `json:"uid"`
		} `json:"metadata"`
		Status *v1.PodStatus `json:"status"`
	}
	var a, b obj
	a.Metadata.UID, a.Status = uid, old
	b.Metadata.UID, b.Status = uid, next
	oldJSON, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	newJSON, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encoding status: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("building status patch: %w", err)
	}
	if string(patch) == "{}" {
		return nil, nil
	}
	// Add the UID precondition: the server rejects the patch when the
	// object's UID differs.
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("building status patch: %w", err)
	}
	m["metadata"] = map[string]any{"uid": string(uid)}
	return json.Marshal(m)
}

func (s *PodStatusSink) forget(uid types.UID) {
	s.mu.Lock()
	delete(s.sent, uid)
	s.mu.Unlock()
}

// DeletePod implements podstatus.PodDeleter: it deletes the pod with
// grace period 0 and its UID as a precondition. Mirror pods and static pods
// are never deleted this way; a pod already gone (or replaced) is no error.
func (s *PodStatusSink) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if pod == nil {
		return fmt.Errorf("%w: nil pod", ErrInvalidPod)
	}
	if kubetypes.IsMirrorPod(pod) || kubetypes.IsStaticPod(pod) {
		return nil
	}
	zero := int64(0)
	uid := pod.UID
	err := s.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	s.forget(uid)
	return nil
}
