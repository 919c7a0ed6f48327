package podworkers

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// WorkQueue holds pod UIDs that are due for a sync at some time. The pod
// workers put every pod back on it after each sync (with the resync interval
// or a back-off as the delay) and the sync loop takes the due pods from it on
// every tick. A UID is on the queue at most once: enqueueing it again
// replaces its due time. It is safe for concurrent use.
type WorkQueue struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	items map[types.UID]time.Time
}

// NewWorkQueue returns an empty queue reading the time from c (the real clock
// when c is nil).
func NewWorkQueue(c clock.PassiveClock) *WorkQueue {
	if c == nil {
		c = clock.RealClock{}
	}
	return &WorkQueue{clock: c, items: make(map[types.UID]time.Time)}
}

// Enqueue makes uid due delay from now, replacing any earlier entry for it.
// A zero or negative delay makes it due on the next GetWork that runs after
// the clock has moved on.
func (q *WorkQueue) Enqueue(uid types.UID, delay time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.items[uid] = q.clock.Now().Add(delay)
}

// GetWork removes and returns, sorted, the UIDs whose due time is strictly
// before now.
func (q *WorkQueue) GetWork() []types.UID {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	var due []types.UID
	for uid, at := range q.items {
		if at.Before(now) {
			due = append(due, uid)
			delete(q.items, uid)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i] < due[j] })
	return due
}

// Len returns how many UIDs are queued, due or not.
func (q *WorkQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// dueTime returns when uid is due and whether it is queued.
func (q *WorkQueue) dueTime(uid types.UID) (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	at, ok := q.items[uid]
	return at, ok
}
