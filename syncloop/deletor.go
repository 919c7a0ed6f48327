package syncloop

import (
	"context"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// deadContainerRemover is the optional capability of a RuntimeManager to
// remove one pod's exited containers, keeping the newest keep of each name
// (of containerID's name only, when it is set); *kuberuntime.Manager has
// it. With it, the loop removes a crash-looping container's older dead
// instances when the PLEG reports it dead, as the kubelet's pod container
// deletor does, instead of at the next container GC.
type deadContainerRemover interface {
	RemoveDeadContainers(ctx context.Context, uid types.UID, containerID string, keep int) error
}

// deletorQueue is how many removal requests may wait for the deletor
// (the kubelet's 50). When it is full a request is dropped: the next
// death, or container GC, removes what it would have.
const deletorQueue = 50

// deleteRequest asks for a pod's dead containers to be removed.
type deleteRequest struct {
	uid types.UID
	// containerID limits the removal to the instances with that
	// container's name; "" means every name.
	containerID string
	keep        int
}

// containerDeletor removes dead containers on request, one request at a
// time, on its own goroutine (run), so that the loop's iteration never
// waits for the runtime.
type containerDeletor struct {
	remove   func(ctx context.Context, uid types.UID, containerID string, keep int) error
	keep     int // instances kept per name of a pod that may still run
	requests chan deleteRequest
	log      *zap.Logger

	// queued holds the requests in the channel, so that one asked again
	// before it is served is not queued twice: removing a pod's N dead
	// containers sends N ContainerDied events with an evented PLEG, each
	// asking for the same "all of the pod's" removal.
	mu     sync.Mutex
	queued map[deleteRequest]struct{}
}

// enqueue queues r without waiting: false when the queue is full. A
// request already queued counts as queued.
func (d *containerDeletor) enqueue(r deleteRequest) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.queued[r]; ok {
		return true
	}
	select {
	case d.requests <- r:
		d.queued[r] = struct{}{}
		return true
	default:
		return false
	}
}

// take marks r, just received, as no longer queued.
func (d *containerDeletor) take(r deleteRequest) {
	d.mu.Lock()
	delete(d.queued, r)
	d.mu.Unlock()
}

// newContainerDeletor returns the deletor of rt, or nil when rt cannot
// remove dead containers. A running pod keeps policy.MaxPerPodContainer
// dead instances of each container, at least one (the kubelet's rule):
// the newest, whose annotation the next restart count is read from.
func newContainerDeletor(rt RuntimeManager, policy kubetypes.GCPolicy, log *zap.Logger) *containerDeletor {
	r, ok := rt.(deadContainerRemover)
	if !ok {
		return nil
	}
	return &containerDeletor{
		remove:   r.RemoveDeadContainers,
		keep:     max(policy.MaxPerPodContainer, 1),
		requests: make(chan deleteRequest, deletorQueue),
		log:      log,
		queued:   make(map[deleteRequest]struct{}),
	}
}

// run serves the requests until ctx ends, then returns nil. A failed
// removal is logged; container GC removes what is left.
func (d *containerDeletor) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-d.requests:
			d.take(r)
			if err := d.remove(ctx, r.uid, r.containerID, r.keep); err != nil && ctx.Err() == nil {
				d.log.Info("cannot remove dead containers; the container GC will",
					zap.String("uid", string(r.uid)), zap.String("container", r.containerID), zap.Error(err))
			}
		}
	}
}

// removeDeadContainers asks the deletor, without waiting, to remove the
// older dead instances of the container a ContainerDied event names: all
// but the newest (Config.GCPolicy.MaxPerPodContainer, at least one) for a
// pod that may still run, and every dead container of the pod when its
// content may be removed (deleted and stopped, evicted, or unknown once
// the pods were synced: the pod workers' ShouldPodContentBeRemoved) or
// its API status says it was evicted. pod is the known pod, or nil. A
// sandbox's death asks for nothing. A request already waiting is not
// queued again. When the deletor's queue is full the request is dropped
// (and logged), as the kubelet does.
func (l *Loop) removeDeadContainers(e *kubetypes.PodLifecycleEvent, pod *v1.Pod) {
	id, ok := e.Data.(string)
	if l.deletor == nil || e.Sandbox || !ok || id == "" {
		return
	}
	r := deleteRequest{uid: e.ID, containerID: id, keep: l.deletor.keep}
	if l.workers.ShouldPodContentBeRemoved(e.ID) || (pod != nil && statusEvicted(pod)) {
		r.containerID, r.keep = "", 0
	}
	if !l.deletor.enqueue(r) {
		l.log.Info("dead container removal dropped: the deletor is busy; the container GC will remove them",
			zap.String("uid", string(e.ID)), zap.String("container", id))
	}
}
