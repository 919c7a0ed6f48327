package kuberuntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nodekit/nodekit/kuberuntime/logs"
	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type gcContainer struct {
	id, name string
	created  int64
	unknown  bool
}

type gcUnit struct {
	uid  types.UID
	name string
}

// GarbageCollect removes dead containers and sandboxes, and the log
// directories of pods that are gone:
//   - dead containers older than MinAge, keeping the newest
//     MaxPerPodContainer per (pod, container) and at most MaxContainers;
//     all of them for pods whose content may be removed (only when
//     allSourcesReady);
//   - sandboxes that are not ready and hold no container, except the newest
//     one of a pod whose content may not be removed;
//   - <PodLogsRoot>/<ns>_<name>_<uid> of pods whose content may be removed
//     (only when allSourcesReady).
//
// Objects of other agents (without LabelPodUID) are never touched. Errors
// are joined; a failure on one object does not stop the others.
func (m *Manager) GarbageCollect(ctx context.Context, policy kubetypes.GCPolicy, pods kubetypes.PodStateProvider, allSourcesReady bool) error {
	if policy.MaxPerPodContainer == 0 {
		policy.MaxPerPodContainer = 1
	}
	var errs []error
	cctx, cancel := m.callCtx(ctx)
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(cctx, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("runtime: gc: list sandboxes: %w", err)
	}
	knownPods := make(map[types.UID]bool)
	for _, sb := range sandboxes {
		if id, ok := identityFromLabels(sb.GetLabels()); ok {
			knownPods[id.UID] = true
		}
	}
	removable := func(uid types.UID) bool {
		if pods == nil {
			return !knownPods[uid]
		}
		return pods.ShouldPodContentBeRemoved(uid) ||
			(policy.EvictNonDeletedPods && pods.ShouldPodRuntimeBeRemoved(uid))
	}

	if err := m.gcContainers(ctx, policy, allSourcesReady, removable); err != nil {
		errs = append(errs, err)
	}
	if err := m.gcSandboxes(ctx, sandboxes, removable); err != nil {
		errs = append(errs, err)
	}
	if allSourcesReady {
		if err := m.gcLogDirs(removable); err != nil {
			errs = append(errs, err)
		}
	}
	m.crashBackoff.gc()
	m.imageBackoff.gc()
	return errors.Join(errs...)
}

func (m *Manager) gcContainers(ctx context.Context, policy kubetypes.GCPolicy, allSourcesReady bool, removable func(types.UID) bool) error {
	cctx, cancel := m.callCtx(ctx)
	containers, err := m.cfg.Runtime.ListContainers(cctx, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("runtime: gc: list containers: %w", err)
	}
	newest := m.cfg.Clock.Now().Add(-policy.MinAge).UnixNano()
	units := make(map[gcUnit][]gcContainer)
	for _, c := range containers {
		if c == nil || c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if c.GetCreatedAt() > newest {
			continue
		}
		id, ok := identityFromLabels(c.GetLabels())
		if !ok {
			continue
		}
		name := containerName(c.GetLabels(), c.GetMetadata())
		u := gcUnit{id.UID, name}
		units[u] = append(units[u], gcContainer{
			id: c.GetId(), name: name, created: c.GetCreatedAt(),
			unknown: c.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN,
		})
	}
	byNewest := func(a, b gcContainer) int { return cmp.Or(cmp.Compare(b.created, a.created), cmp.Compare(a.id, b.id)) }
	var errs []error
	removeOldest := func(cs []gcContainer, n int) []gcContainer {
		slices.SortFunc(cs, byNewest)
		keep := max(len(cs)-n, 0)
		for _, c := range cs[keep:] {
			if err := m.gcRemoveContainer(ctx, c); err != nil {
				errs = append(errs, err)
			}
		}
		return cs[:keep]
	}
	// Deterministic order of units.
	keys := make([]gcUnit, 0, len(units))
	for u := range units {
		keys = append(keys, u)
	}
	slices.SortFunc(keys, func(a, b gcUnit) int { return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.name, b.name)) })

	if allSourcesReady {
		for _, u := range keys {
			if removable(u.uid) {
				removeOldest(units[u], len(units[u]))
				delete(units, u)
			}
		}
	}
	if policy.MaxPerPodContainer >= 0 {
		for _, u := range keys {
			if cs, ok := units[u]; ok && len(cs) > policy.MaxPerPodContainer {
				units[u] = removeOldest(cs, len(cs)-policy.MaxPerPodContainer)
			}
		}
	}
	if policy.MaxContainers > 0 {
		total := 0
		for _, cs := range units {
			total += len(cs)
		}
		if total > policy.MaxContainers {
			per := max(policy.MaxContainers/len(units), 1)
			total = 0
			for _, u := range keys {
				if cs, ok := units[u]; ok {
					if len(cs) > per {
						units[u] = removeOldest(cs, len(cs)-per)
					}
					total += len(units[u])
				}
			}
			if total > policy.MaxContainers {
				var flat []gcContainer
				for _, u := range keys {
					flat = append(flat, units[u]...)
				}
				removeOldest(flat, total-policy.MaxContainers)
			}
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) gcRemoveContainer(ctx context.Context, c gcContainer) error {
	if c.unknown {
		// It may still run: stop it first.
		sctx, cancel := context.WithTimeout(ctx, MinimumGracePeriodSeconds*time.Second+m.cfg.CallTimeout)
		err := m.cfg.Runtime.StopContainer(sctx, c.id, MinimumGracePeriodSeconds)
		cancel()
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("%w: %s (%s): %w", ErrKillContainer, c.name, c.id, err)
		}
	}
	// Its log files go with it, as the kubelet removes them.
	cctx, cancel := m.callCtx(ctx)
	st, err := m.cfg.Runtime.ContainerStatus(cctx, c.id, false)
	cancel()
	logPath := ""
	if err == nil {
		logPath = st.GetStatus().GetLogPath()
	}
	cctx, cancel = m.callCtx(ctx)
	err = m.cfg.Runtime.RemoveContainer(cctx, c.id)
	cancel()
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("%w: %s (%s): %w", ErrRemoveContainer, c.name, c.id, err)
	}
	m.removeContainerLog(logPath)
	m.log.Debug("removed dead container", zap.String("container", c.name), zap.String("id", c.id))
	return nil
}

// removeContainerLog deletes a removed container's log and its rotated
// files, when the path is inside PodLogsRoot (a runtime's word is not
// enough to delete files elsewhere).
func (m *Manager) removeContainerLog(path string) {
	if path == "" || !filepath.IsAbs(path) {
		return
	}
	rel, err := filepath.Rel(m.cfg.PodLogsRoot, path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return
	}
	if err := logs.Remove(path); err != nil {
		m.log.Info("removing a container log failed", zap.String("path", path), zap.Error(err))
	}
}

func (m *Manager) gcSandboxes(ctx context.Context, sandboxes []*runtimeapi.PodSandbox, removable func(types.UID) bool) error {
	// Containers as they are now (after container GC).
	cctx, cancel := m.callCtx(ctx)
	containers, err := m.cfg.Runtime.ListContainers(cctx, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("runtime: gc: list containers: %w", err)
	}
	inUse := make(map[string]bool, len(containers))
	for _, c := range containers {
		inUse[c.GetPodSandboxId()] = true
	}
	type sbInfo struct {
		id      string
		created int64
		active  bool
	}
	byPod := make(map[types.UID][]sbInfo)
	for _, sb := range sandboxes {
		id, ok := identityFromLabels(sb.GetLabels())
		if !ok {
			continue
		}
		byPod[id.UID] = append(byPod[id.UID], sbInfo{
			id: sb.GetId(), created: sb.GetCreatedAt(),
			active: sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY || inUse[sb.GetId()],
		})
	}
	uids := make([]types.UID, 0, len(byPod))
	for uid := range byPod {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	var errs []error
	for _, uid := range uids {
		sbs := byPod[uid]
		slices.SortFunc(sbs, func(a, b sbInfo) int { return cmp.Or(cmp.Compare(b.created, a.created), cmp.Compare(a.id, b.id)) })
		keep := 1
		if removable(uid) {
			keep = 0
		}
		for _, sb := range sbs[min(keep, len(sbs)):] {
			if sb.active {
				continue
			}
			if err := m.gcRemoveSandbox(ctx, sb.id); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// gcRemoveSandbox stops (a no-op for a stopped one) and removes a sandbox;
// one already gone is not an error.
func (m *Manager) gcRemoveSandbox(ctx context.Context, id string) error {
	cctx, cancel := m.callCtx(ctx)
	err := m.cfg.Runtime.StopPodSandbox(cctx, id)
	cancel()
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("%w: %s: %w", ErrKillSandbox, id, err)
	}
	cctx, cancel = m.callCtx(ctx)
	err = m.cfg.Runtime.RemovePodSandbox(cctx, id)
	cancel()
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("runtime: remove sandbox %s: %w", id, err)
	}
	return nil
}

// listPodContainers lists the containers of pod uid, as the removals need
// them: a label selector on its UID, and on what comes back (a runtime may
// ignore the selector) only those whose labels name the pod.
func (m *Manager) listPodContainers(ctx context.Context, uid types.UID) ([]*runtimeapi.Container, error) {
	cctx, cancel := m.callCtx(ctx)
	cs, err := m.cfg.Runtime.ListContainers(cctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}})
	cancel()
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(cs, func(c *runtimeapi.Container) bool {
		id, ok := identityFromLabels(c.GetLabels())
		return c == nil || !ok || id.UID != uid
	}), nil
}

// hasSandboxContainer: a container of cs is in sandbox id (a runtime may
// ignore the filter).
func hasSandboxContainer(cs []*runtimeapi.Container, id string) bool {
	for _, c := range cs {
		if c != nil && c.GetPodSandboxId() == id {
			return true
		}
	}
	return false
}

// RemovePodContent removes one pod's dead containers (with their log
// files) and its stopped sandboxes at once, as GarbageCollect does for a
// pod whose content may be removed, without waiting for the next
// collection. Call it only for such a pod: deleted and stopped, or evicted
// (kubetypes.PodStateProvider's ShouldPodContentBeRemoved). A running
// container, and a ready sandbox or one that still holds any container
// (also one without the pod's labels), are left alone. It asks the runtime
// only for the pod's own objects (a label selector on its UID, checked
// again on what comes back) and for each stopped sandbox's containers.
// Errors are joined; a failure on one object does not stop the others,
// and the next GarbageCollect retries what is left.
//
// The kubelet removes such a pod's dead containers when the relisting PLEG
// reports them dead after the pod worker has stopped (its pod container
// deletor) and leaves the sandbox to the next collection, up to a minute
// later. Removing both when the pod worker finishes gives the same end
// state whatever the PLEG, and keeps no dead object of a deleted pod for
// that minute: on a churning node, a minute of them is most of what the
// runtime and the agent hold.
func (m *Manager) RemovePodContent(ctx context.Context, uid types.UID) error {
	containers, err := m.listPodContainers(ctx, uid)
	if err != nil {
		return fmt.Errorf("runtime: remove content of pod %s: list containers: %w", uid, err)
	}
	var errs []error
	for _, c := range containers {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		gc := gcContainer{id: c.GetId(), name: containerName(c.GetLabels(), c.GetMetadata()), created: c.GetCreatedAt(),
			unknown: c.GetState() == runtimeapi.ContainerState_CONTAINER_UNKNOWN}
		if err := m.gcRemoveContainer(ctx, gc); err != nil {
			errs = append(errs, err)
		}
	}
	cctx, cancel := m.callCtx(ctx)
	sandboxes, err := m.cfg.Runtime.ListPodSandbox(cctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelPodUID: string(uid)}})
	cancel()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("runtime: remove content of pod %s: list sandboxes: %w", uid, err))...)
	}
	for _, sb := range sandboxes {
		if sb == nil || sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		if id, ok := identityFromLabels(sb.GetLabels()); !ok || id.UID != uid {
			continue
		}
		// Any container still in it, whoever made it, keeps it (as in
		// GarbageCollect): a running one, one that could not be removed,
		// another agent's.
		cctx, cancel := m.callCtx(ctx)
		left, err := m.cfg.Runtime.ListContainers(cctx, &runtimeapi.ContainerFilter{PodSandboxId: sb.GetId()})
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("runtime: remove content of pod %s: list containers of sandbox %s: %w", uid, sb.GetId(), err))
			continue
		}
		if hasSandboxContainer(left, sb.GetId()) {
			continue
		}
		if err := m.gcRemoveSandbox(ctx, sb.GetId()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// safeSegment: s can be used as one path element (no separators, no dot
// names, no NUL).
func safeSegment(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\\\x00")
}

// podLogDirName is the log directory name of a pod, or false when a part is
// not a safe path segment.
func podLogDirName(namespace, name string, uid types.UID) (string, bool) {
	if !safeSegment(namespace) || !safeSegment(name) || !safeSegment(string(uid)) {
		return "", false
	}
	return namespace + "_" + name + "_" + string(uid), true
}

func (m *Manager) gcLogDirs(removable func(types.UID) bool) error {
	entries, err := os.ReadDir(m.cfg.PodLogsRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("runtime: gc: read %s: %w", m.cfg.PodLogsRoot, err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		parts := strings.Split(e.Name(), "_")
		if len(parts) != 3 {
			m.log.Info("gc: skipping unexpected entry in pod logs root", zap.String("name", e.Name()))
			continue
		}
		uid := types.UID(parts[2])
		dir, ok := podLogDirName(parts[0], parts[1], uid)
		if !ok || dir != e.Name() {
			m.log.Info("gc: skipping pod log dir with an unsafe name", zap.String("name", e.Name()))
			continue
		}
		if !removable(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(m.cfg.PodLogsRoot, dir)); err != nil {
			errs = append(errs, fmt.Errorf("runtime: gc: remove %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}
