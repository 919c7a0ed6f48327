package kuberuntime

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// isNotFound: the CRI object does not exist (any more).
func isNotFound(err error) bool { return err != nil && status.Code(err) == codes.NotFound }

func containerState(s runtimeapi.ContainerState) kubetypes.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return kubetypes.ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return kubetypes.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return kubetypes.ContainerStateExited
	}
	return kubetypes.ContainerStateUnknown
}

func sandboxState(s runtimeapi.PodSandboxState) kubetypes.ContainerState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return kubetypes.ContainerStateRunning
	}
	return kubetypes.ContainerStateExited
}

// containerName is the container's name as its labels (or metadata) say.
func containerName(labels map[string]string, md *runtimeapi.ContainerMetadata) string {
	if n := labels[LabelContainerName]; n != "" {
		return n
	}
	return md.GetName()
}

// GetPods lists the pods the runtime holds, grouped by the pod identity
// labels; sandboxes and containers without LabelPodUID (other agents') are
// ignored. all=false lists only ready sandboxes and running containers.
// Pods come newest first (by newest sandbox), their containers and
// sandboxes newest first.
func (m *Manager) GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error) {
	var sbFilter *runtimeapi.PodSandboxFilter
	var cFilter *runtimeapi.ContainerFilter
	if !all {
		sbFilter = &runtimeapi.PodSandboxFilter{State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}}
		cFilter = &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	}
	cctx, cancel := m.callCtx(ctx)
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(cctx, sbFilter)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("runtime: list pod sandboxes: %w", err)
	}
	cctx, cancel = m.callCtx(ctx)
	containers, err := m.cfg.Runtime.ListContainers(cctx, cFilter)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers: %w", err)
	}

	pods := make(map[types.UID]*kubetypes.Pod)
	get := func(id podIdentity) *kubetypes.Pod {
		p := pods[id.UID]
		if p == nil {
			p = &kubetypes.Pod{ID: id.UID, Name: id.Name, Namespace: id.Namespace}
			pods[id.UID] = p
		}
		return p
	}
	for _, sb := range sandboxes {
		if sb == nil {
			continue
		}
		if !all && sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		id, ok := identityFromLabels(sb.GetLabels())
		if !ok {
			continue
		}
		p := get(id)
		p.Sandboxes = append(p.Sandboxes, &kubetypes.Container{
			ID: sb.GetId(), Name: sb.GetMetadata().GetName(), State: sandboxState(sb.GetState()), CreatedAt: sb.GetCreatedAt(),
		})
		if sb.GetCreatedAt() > p.CreatedAt {
			p.CreatedAt = sb.GetCreatedAt()
		}
	}
	for _, c := range containers {
		if c == nil {
			continue
		}
		if !all && c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		id, ok := identityFromLabels(c.GetLabels())
		if !ok {
			continue
		}
		info := containerInfoFromAnnotations(c.GetAnnotations())
		p := get(id)
		p.Containers = append(p.Containers, &kubetypes.Container{
			ID:          c.GetId(),
			Name:        containerName(c.GetLabels(), c.GetMetadata()),
			Image:       c.GetImage().GetImage(),
			ImageID:     c.GetImageId(),
			ImageRef:    c.GetImageRef(),
			Hash:        info.Hash,
			State:       containerState(c.GetState()),
			CreatedAt:   c.GetCreatedAt(),
			Type:        c.GetLabels()[LabelContainerType],
			GracePeriod: info.GracePeriod,
		})
	}
	out := make([]*kubetypes.Pod, 0, len(pods))
	newestFirst := func(a, b *kubetypes.Container) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(a.ID, b.ID))
	}
	for _, p := range pods {
		slices.SortFunc(p.Sandboxes, newestFirst)
		slices.SortFunc(p.Containers, newestFirst)
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *kubetypes.Pod) int {
		return cmp.Or(cmp.Compare(b.CreatedAt, a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// GetPodStatus reads the runtime status of one pod: every sandbox and every
// container instance carrying its UID, newest first. Objects that vanish
// between the list and the status call are skipped. IPs come from the
// newest ready sandbox.
func (m *Manager) GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubetypes.PodStatus, error) {
	ps := &kubetypes.PodStatus{ID: uid, Name: name, Namespace: namespace}
	if uid == "" {
		return ps, nil
	}
	sel := map[string]string{LabelPodUID: string(uid)}
	cctx, cancel := m.callCtx(ctx)
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("runtime: list sandboxes of pod %s: %w", uid, err)
	}
	for _, sb := range sandboxes {
		if sb == nil || sb.GetLabels()[LabelPodUID] != string(uid) {
			continue
		}
		if err := m.readSandbox(ctx, ps, sb.GetId()); err != nil {
			return nil, err
		}
	}

	cctx, cancel = m.callCtx(ctx)
	containers, err := m.cfg.Runtime.ListContainers(cctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("runtime: list containers of pod %s: %w", uid, err)
	}
	for _, c := range containers {
		if c == nil || c.GetLabels()[LabelPodUID] != string(uid) {
			continue
		}
		if err := m.readContainer(ctx, ps, c, c.GetId()); err != nil {
			return nil, err
		}
	}
	settleStatus(ps)
	return ps, nil
}

// GetPodStatusAfterSync reads the status of a pod that SyncPod has just
// changed: before is the status SyncPod was given, res what it did.
// Only a pod's syncs make its sandboxes and containers, so when every step
// succeeded the pod holds before's objects and those the steps made (ID),
// less any removed since: it reads those, one status call each, without
// GetPodStatus's two list calls. A failed step may have left an object
// whose ID it never learned (a create that timed out after the runtime
// made it), and a nil before says nothing of what exists: both read as
// GetPodStatus. An object made behind the agent's back is missing from
// the result; the PLEG's next relist lists it and reads the pod again.
func (m *Manager) GetPodStatusAfterSync(ctx context.Context, pod *v1.Pod, before *kubetypes.PodStatus, res kubetypes.SyncResult) (*kubetypes.PodStatus, error) {
	if before == nil || pod.UID == "" || before.ID != pod.UID || res.Err() != nil {
		return m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	}
	ps := &kubetypes.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	var made []string
	for _, s := range res.Steps {
		if s.ID == "" {
			continue
		}
		if s.Action == kubetypes.ActionCreateSandbox {
			if err := m.readSandbox(ctx, ps, s.ID); err != nil {
				return nil, err
			}
		} else {
			made = append(made, s.ID)
		}
	}
	for _, sb := range before.SandboxStatuses {
		if err := m.readSandbox(ctx, ps, sb.GetId()); err != nil {
			return nil, err
		}
	}
	for _, id := range made {
		if err := m.readContainer(ctx, ps, nil, id); err != nil {
			return nil, err
		}
	}
	for _, cs := range before.ContainerStatuses {
		if err := m.readContainer(ctx, ps, nil, cs.ID); err != nil {
			return nil, err
		}
	}
	settleStatus(ps)
	return ps, nil
}

// PodStatusFromEvent builds a pod's status from a CRI container event
// alone, as the kubelet's evented PLEG does: the event's sandbox status and
// the statuses of that sandbox's containers, which the runtime put together
// just before it sent the event (containerd 1.7 and 2.x do). It makes no
// runtime call (an exited container's termination message is read from its
// file, as GetPodStatus does). ok is false when the event lacks the sandbox
// status or its metadata, or carries no container status (containerd sends
// none when it could not read them): read the pod with GetPodStatus then.
// The status holds that one sandbox only; a caller must know the pod has no
// other.
func (m *Manager) PodStatusFromEvent(ev *runtimeapi.ContainerEventResponse) (*kubetypes.PodStatus, bool) {
	sb := ev.GetPodSandboxStatus()
	md := sb.GetMetadata()
	if md == nil || sb.GetId() == "" || len(ev.GetContainersStatuses()) == 0 {
		return nil, false
	}
	ps := &kubetypes.PodStatus{
		ID:              types.UID(md.GetUid()),
		Name:            md.GetName(),
		Namespace:       md.GetNamespace(),
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{sb},
	}
	for _, s := range ev.GetContainersStatuses() {
		if s == nil || s.GetId() == "" {
			continue
		}
		cs := toContainerStatus(nil, s)
		if cs.State == kubetypes.ContainerStateExited && cs.Message == "" {
			labels, annotations := containerMeta(nil, s)
			cs.Message = m.terminationMessage(s, containerInfoFromAnnotations(annotations), labels)
		}
		ps.ContainerStatuses = append(ps.ContainerStatuses, cs)
	}
	settleStatus(ps)
	return ps, true
}

// readSandbox appends the status of sandbox id to ps; a sandbox gone (or
// without a status) is skipped.
func (m *Manager) readSandbox(ctx context.Context, ps *kubetypes.PodStatus, id string) error {
	cctx, cancel := m.callCtx(ctx)
	resp, err := m.cfg.Runtime.PodSandboxStatus(cctx, id, false)
	cancel()
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runtime: status of sandbox %s: %w", id, err)
	}
	if resp.GetStatus() != nil {
		ps.SandboxStatuses = append(ps.SandboxStatuses, resp.GetStatus())
	}
	return nil
}

// readContainer appends the status of container id to ps; listed is its
// entry in a listing, if there is one (its labels and annotations stand in
// for a status without them). A container gone (or without a status) is
// skipped.
func (m *Manager) readContainer(ctx context.Context, ps *kubetypes.PodStatus, listed *runtimeapi.Container, id string) error {
	cctx, cancel := m.callCtx(ctx)
	resp, err := m.cfg.Runtime.ContainerStatus(cctx, id, false)
	cancel()
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runtime: status of container %s: %w", id, err)
	}
	s := resp.GetStatus()
	if s == nil {
		m.log.Debug("container status is empty", zap.String("container", id))
		return nil
	}
	cs := toContainerStatus(listed, s)
	if cs.ID == "" {
		cs.ID = id
	}
	if cs.State == kubetypes.ContainerStateExited && cs.Message == "" {
		labels, annotations := containerMeta(listed, s)
		cs.Message = m.terminationMessage(s, containerInfoFromAnnotations(annotations), labels)
	}
	ps.ContainerStatuses = append(ps.ContainerStatuses, cs)
	return nil
}

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// containerMeta is the labels and annotations of a container's status,
// or of its listing (c, may be nil) where the status has none.
func containerMeta(c *runtimeapi.Container, s *runtimeapi.ContainerStatus) (labels, annotations map[string]string) {
	labels = s.GetLabels()
	if len(labels) == 0 {
		labels = c.GetLabels()
	}
	annotations = s.GetAnnotations()
	if len(annotations) == 0 {
		annotations = c.GetAnnotations()
	}
	return labels, annotations
}

func toContainerStatus(c *runtimeapi.Container, s *runtimeapi.ContainerStatus) *kubetypes.ContainerStatus {
	labels, annotations := containerMeta(c, s)
	info := containerInfoFromAnnotations(annotations)
	id := s.GetId()
	if id == "" {
		id = c.GetId()
	}
	return &kubetypes.ContainerStatus{
		ID:           id,
		Name:         containerName(labels, s.GetMetadata()),
		State:        containerState(s.GetState()),
		CreatedAt:    nsTime(s.GetCreatedAt()),
		StartedAt:    nsTime(s.GetStartedAt()),
		FinishedAt:   nsTime(s.GetFinishedAt()),
		ExitCode:     s.GetExitCode(),
		Image:        s.GetImage().GetImage(),
		ImageID:      s.GetImageId(),
		ImageRef:     s.GetImageRef(),
		Hash:         info.Hash,
		RestartCount: info.RestartCount,
		Reason:       s.GetReason(),
		Message:      s.GetMessage(),
		Resources:    s.GetResources(),
		Type:         labels[LabelContainerType],
		GracePeriod:  info.GracePeriod,
		LogPath:      s.GetLogPath(),
	}
}

// settleStatus orders a status read object by object (newest first) and takes
// the IPs from the newest ready sandbox.
func settleStatus(ps *kubetypes.PodStatus) {
	slices.SortStableFunc(ps.SandboxStatuses, func(a, b *runtimeapi.PodSandboxStatus) int {
		return cmp.Compare(b.GetCreatedAt(), a.GetCreatedAt())
	})
	for _, sb := range ps.SandboxStatuses {
		if sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if ip := sb.GetNetwork().GetIp(); ip != "" {
			ps.IPs = append(ps.IPs, ip)
			for _, extra := range sb.GetNetwork().GetAdditionalIps() {
				if extra.GetIp() != "" {
					ps.IPs = append(ps.IPs, extra.GetIp())
				}
			}
		}
		break
	}
	slices.SortStableFunc(ps.ContainerStatuses, func(a, b *kubetypes.ContainerStatus) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.RestartCount, a.RestartCount))
	})
}
