package syncloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podworkers"
)

// HandlePodCleanups is the loop's housekeeping (the kubelet's
// HandlePodCleanups). It does nothing until every source is ready; then it:
//   - tells the pod workers the desired pods (SyncKnownPods): workers of
//     pods no longer desired begin stopping them, finished ones are
//     forgotten;
//   - re-sends desired, active pods the workers do not know (a pod whose
//     UID came back after it finished);
//   - kills, with a grace of 1s, runtime pods that run and that neither the
//     config nor the pod workers know (orphans);
//   - forgets the statuses of pods that are gone, and what the runtime
//     (back-offs) and the event recorder (a pod's last warning) remember
//     of them when they can forget (a ForgetPod(types.UID) method);
//   - removes the directories of pods that are gone and whose content may
//     be removed, when no container of theirs runs;
//   - every ContainerGCPeriod, has the runtime garbage-collect dead
//     containers and sandboxes;
//   - refreshes the running pods and containers gauges;
//   - calls Config.Idle when the node is idle: no pod desired or known to
//     the pod workers, and none in the runtime (a listing that failed
//     counts as not idle).
//
// Errors of the steps are joined; a failed step does not stop the others.
func (l *Loop) HandlePodCleanups(ctx context.Context) error {
	if !l.cfg.SourcesReady() {
		return nil
	}
	l.houseMu.Lock()
	defer l.houseMu.Unlock()
	start := l.clock.Now()
	defer func() { l.metrics.housekeepingDone(l.clock.Since(start)) }()

	var errs []error
	allPods := l.Pods()
	working := l.workers.SyncKnownPods(allPods)
	if !l.knownPods {
		// Pods without a worker (rejected at admission) no longer count
		// as possibly running: their held-back statuses may go now.
		l.knownPods = true
		l.status.Recheck()
	}
	desired := make(map[types.UID]bool, len(allPods))
	for _, p := range allPods {
		desired[p.UID] = true
	}

	runtimePods, err := l.runtimePods(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("listing runtime pods: %w", err))
	}
	l.metrics.runtimePods(runtimePods)
	running := make(map[types.UID]*kubetypes.Pod)
	for _, p := range runtimePods {
		if p != nil && podRuns(p) {
			running[p.ID] = p
		}
	}

	// Statuses of pods that are gone.
	keep := make(map[types.UID]bool, len(allPods)+len(working))
	for uid := range desired {
		keep[uid] = true
	}
	for uid := range working {
		keep[uid] = true
	}
	l.status.RemoveOrphanedStatuses(keep)

	// Pod cgroups of pods that are gone (a container manager that can do
	// this). A pod keeps its cgroup while its workers may still have
	// containers running, also when its config is gone.
	if cc, ok := l.cfg.Cgroups.(interface {
		CleanupOrphans(ctx context.Context, activePods []*v1.Pod, sourcesReady bool) (int, error)
	}); ok {
		keep := l.activePodsExcept("")
		kept := make(map[types.UID]bool, len(keep))
		for _, p := range keep {
			kept[p.UID] = true
		}
		for uid := range working {
			if !kept[uid] && l.workers.CouldHaveRunningContainers(uid) {
				keep = append(keep, &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}})
			}
		}
		if _, err := cc.CleanupOrphans(ctx, keep, true); err != nil {
			errs = append(errs, fmt.Errorf("pod cgroup cleanup: %w", err))
		}
	}

	// Probe workers of pods that are gone (a prober that can do this).
	if pc, ok := l.cfg.Probes.(interface {
		CleanupPods(desired map[types.UID]struct{})
	}); ok {
		active := make(map[types.UID]struct{}, len(desired))
		for uid := range desired {
			if !l.workers.IsPodTerminationRequested(uid) {
				active[uid] = struct{}{}
			}
		}
		pc.CleanupPods(active)
	}

	// Desired pods the workers don't know: start them again.
	for _, p := range allPods {
		if _, ok := working[p.UID]; ok || !l.isActive(p) {
			continue
		}
		l.log.Info("pod restarted: desired but unknown to the pod workers", zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(p.UID)))
		l.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
		working[p.UID] = podworkers.KnownPod{State: podworkers.SyncPod, HasConfig: true, Static: kubetypes.IsStaticPod(p)}
	}

	// Runtime pods nobody knows: kill them.
	if err == nil {
		for uid, rp := range running {
			if _, ok := working[uid]; ok {
				continue
			}
			one := int64(1)
			l.log.Info("killing orphaned runtime pod", zap.String("pod", rp.Namespace+"/"+rp.Name), zap.String("uid", string(uid)))
			l.workers.UpdatePod(podworkers.UpdatePodOptions{
				UpdateType:     podworkers.SyncPodKill,
				RunningPod:     rp,
				KillPodOptions: &podworkers.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &one},
			})
		}
	}

	// What the runtime (back-offs) and the event recorders (a pod's last
	// warning) remember of pods that are gone, when they can forget.
	rf, _ := l.cfg.Runtime.(podForgetter)
	ef, _ := l.cfg.Recorder.(podForgetter)
	var gone []types.UID
	l.podsMu.Lock()
	for uid := range l.seen {
		if _, w := working[uid]; !w && !desired[uid] {
			if rf != nil {
				rf.ForgetPod(uid)
			}
			if ef != nil {
				ef.ForgetPod(uid)
			}
			delete(l.seen, uid)
			gone = append(gone, uid)
		}
	}
	l.podsMu.Unlock()

	// Their dead containers and sandboxes, now rather than at the next
	// container GC (which retries what fails here). The first failure
	// ends the round: a runtime that hangs holds the loop for one call's
	// timeout, not one per pod.
	if rc, ok := l.cfg.Runtime.(podContentRemover); ok && err == nil {
		for _, uid := range gone {
			// Asked again at the call: a pod added back since (an
			// embedder calling HandlePodAdditions from another
			// goroutine) keeps what it has.
			if !l.workers.ShouldPodContentBeRemoved(uid) {
				continue
			}
			if rerr := rc.RemovePodContent(ctx, uid); rerr != nil {
				if ctx.Err() == nil {
					l.log.Info("cannot remove the containers of a pod that is gone; the container GC will", zap.String("uid", string(uid)), zap.Error(rerr))
				}
				break
			}
		}
	}

	// Directories of pods that are gone.
	if err == nil {
		if derr := l.cleanupPodDirs(desired, working, running); derr != nil {
			errs = append(errs, derr)
		}
	}

	// The node idle: each round, with when this idle stretch began (the
	// runtime's listing is from before this round's container GC, so the
	// round after the GC that removed the last dead container is the
	// first to see it).
	switch idle := err == nil && len(allPods) == 0 && len(working) == 0 && len(runtimePods) == 0; {
	case !idle:
		l.idleSince = time.Time{}
	case l.idleSince.IsZero():
		l.idleSince = start
	}
	if !l.idleSince.IsZero() && l.cfg.Idle != nil {
		l.cfg.Idle(l.idleSince)
	}

	// Container garbage collection.
	if l.lastGC.IsZero() || l.clock.Since(l.lastGC) >= l.cfg.ContainerGCPeriod {
		l.lastGC = l.clock.Now()
		if gerr := l.cfg.Runtime.GarbageCollect(ctx, l.cfg.GCPolicy, l.workers, true); gerr != nil {
			if ctx.Err() == nil {
				kubetypes.RecorderOrNop(l.cfg.Recorder).Event(kubetypes.NodeRef(l.cfg.NodeName), v1.EventTypeWarning, kubetypes.ReasonContainerGCFailed, gerr.Error())
			}
			errs = append(errs, fmt.Errorf("container garbage collection: %w", gerr))
		}
	}
	return errors.Join(errs...)
}

// podRuns: a container or sandbox of the runtime pod is not exited.
func podRuns(p *kubetypes.Pod) bool {
	for _, c := range p.Containers {
		if c.State != kubetypes.ContainerStateExited {
			return true
		}
	}
	for _, s := range p.Sandboxes {
		if s.State == kubetypes.ContainerStateRunning {
			return true
		}
	}
	return false
}

// cleanupPodDirs removes the directories of pods that are neither desired
// nor worked on, whose content may be removed and that don't run.
func (l *Loop) cleanupPodDirs(desired map[types.UID]bool, working map[types.UID]podworkers.KnownPod, running map[types.UID]*kubetypes.Pod) error {
	uids, err := l.podSyncer.dirs.list()
	if err != nil {
		return fmt.Errorf("listing pod directories: %w", err)
	}
	var errs []error
	for _, uid := range uids {
		if desired[uid] || running[uid] != nil {
			continue
		}
		if _, ok := working[uid]; ok {
			continue
		}
		if !l.workers.ShouldPodContentBeRemoved(uid) || l.workers.CouldHaveRunningContainers(uid) {
			continue
		}
		gone, err := l.podSyncer.dirs.remove(uid)
		if err != nil {
			errs = append(errs, fmt.Errorf("removing the directory of pod %s: %w", uid, err))
			continue
		}
		if !gone {
			l.log.Info("pod directory kept: its volumes or plugins directory is not empty", zap.String("uid", string(uid)))
		}
	}
	return errors.Join(errs...)
}

// runtimePods lists the runtime's pods for housekeeping: the PLEG's last
// listing when it began at most listingMaxAge ago (no second listing of
// the runtime), else the runtime's own.
func (l *Loop) runtimePods(ctx context.Context) ([]*kubetypes.Pod, error) {
	if lister, ok := l.cfg.PLEG.(runtimeLister); ok {
		if pods, at := lister.Listing(); !at.IsZero() && l.clock.Since(at) <= listingMaxAge {
			return pods, nil
		}
	}
	return l.cfg.Runtime.GetPods(ctx, true)
}
