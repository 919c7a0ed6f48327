package podstatus

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Sink is where the Manager delivers pod statuses: the API
// server (a status patch), a local store, a test. SyncPodStatus is called
// with the pod as the agent knows it and the status to record; an error
// leaves the status pending, and it is offered again on the next sync.
// Calls come from one goroutine at a time.
//
// A sink that can also remove pods implements PodDeleter; the
// Manager finds it by type assertion.
type Sink interface {
	SyncPodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error
}

// PodDeleter is the optional capability of a Sink to delete a
// pod once it is finished: the Manager calls DeletePod after a
// successful status sync of a pod that has a deletion timestamp, a terminal
// phase and whose termination the agent has completed (TerminatePod), as
// the kubelet deletes such pods from the API server (grace 0, UID
// precondition). Mirror pods are never deleted this way.
type PodDeleter interface {
	DeletePod(ctx context.Context, pod *v1.Pod) error
}

// PodForgetter is the optional capability of a Sink to drop what it keeps
// of a pod the agent no longer knows: removed from its sources and stopped,
// its status dropped by RemoveOrphanedStatuses. The Manager calls it from
// its sync, as it calls SyncPodStatus, once per such pod it had sent.
type PodForgetter interface {
	ForgetPod(uid types.UID)
}

// MaxDeletedMarks bounds how many deleted pods a MemorySink remembers
// (Deleted): past it the oldest mark is dropped.
const MaxDeletedMarks = 1024

// MemorySink is an in-memory Sink, PodDeleter and PodForgetter: it keeps
// the latest status of every pod the agent knows, by UID, and forgets a pod
// once the agent does (so an agent that runs for months keeps only its
// current pods). The marks of deleted pods (Deleted) are a bounded
// history: the last MaxDeletedMarks. It is safe for concurrent use; the
// zero value is not: use NewMemorySink.
type MemorySink struct {
	mu       sync.Mutex
	statuses map[types.UID]v1.PodStatus
	deleted  map[types.UID]bool
	order    []types.UID // deleted marks, oldest first (may hold forgotten UIDs)
	updates  int
	changed  chan struct{}
}

// NewMemorySink returns an empty MemorySink.
func NewMemorySink() *MemorySink {
	return &MemorySink{
		statuses: make(map[types.UID]v1.PodStatus),
		deleted:  make(map[types.UID]bool),
		changed:  make(chan struct{}, 1),
	}
}

// SyncPodStatus records a copy of status as the pod's latest status. It
// fails only when ctx is done or pod is nil.
func (s *MemorySink) SyncPodStatus(ctx context.Context, pod *v1.Pod, status v1.PodStatus) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if pod == nil {
		return ErrNoPod
	}
	s.mu.Lock()
	s.statuses[pod.UID] = *status.DeepCopy()
	delete(s.deleted, pod.UID)
	s.updates++
	s.mu.Unlock()
	s.signal()
	return nil
}

// DeletePod forgets the pod's status and remembers that it was deleted.
func (s *MemorySink) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if pod == nil {
		return ErrNoPod
	}
	s.mu.Lock()
	delete(s.statuses, pod.UID)
	if !s.deleted[pod.UID] {
		s.deleted[pod.UID] = true
		s.order = append(s.order, pod.UID)
	}
	// Drop the oldest marks past the bound; compact the order when
	// UIDs no longer marked make up most of it.
	for len(s.deleted) > MaxDeletedMarks {
		delete(s.deleted, s.order[0])
		s.order = s.order[1:]
	}
	if len(s.order) > 2*MaxDeletedMarks && len(s.order) > 2*len(s.deleted) {
		kept := make([]types.UID, 0, len(s.deleted))
		for _, uid := range s.order {
			if s.deleted[uid] {
				kept = append(kept, uid)
			}
		}
		s.order = kept
	}
	s.mu.Unlock()
	s.signal()
	return nil
}

// ForgetPod drops the pod's status and its deleted mark.
func (s *MemorySink) ForgetPod(uid types.UID) {
	s.mu.Lock()
	_, had := s.statuses[uid]
	delete(s.statuses, uid)
	delete(s.deleted, uid)
	s.mu.Unlock()
	if had {
		s.signal()
	}
}

func (s *MemorySink) signal() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// Get returns a copy of the latest status recorded for uid.
func (s *MemorySink) Get(uid types.UID) (v1.PodStatus, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.statuses[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *st.DeepCopy(), true
}

// Deleted reports whether DeletePod was called for uid (and no status was
// recorded for it since).
func (s *MemorySink) Deleted(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleted[uid]
}

// Updates is the number of statuses recorded so far.
func (s *MemorySink) Updates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updates
}

// Len is the number of pods with a recorded status.
func (s *MemorySink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.statuses)
}

// Changed receives a value (coalesced) after each recorded status or
// deletion, for waiting on a Manager that runs in the background.
func (s *MemorySink) Changed() <-chan struct{} {
	return s.changed
}
