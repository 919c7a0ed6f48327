package pleg

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
)

// Cache holds the latest runtime status of every pod the runtime knows,
// together with the time each status is known to be valid from.
//
// Besides the per-pod times there is a global time (UpdateTime): after a
// relist that started at t, every record — and the absence of a record — is
// known to be at least as new as t. A pod the cache has no record of has no
// containers or sandboxes in the runtime, so Get returns an empty status
// carrying only its UID.
//
// GetNewerThan lets a pod worker wait for a status that reflects what it did
// at or after a given time. A Cache is safe for concurrent use.
type Cache struct {
	clock clock.Clock

	mu     sync.Mutex
	pods   map[types.UID]*cacheEntry
	global time.Time // zero until the first UpdateTime
	// waiters per pod, notified (and removed) when their condition holds.
	waiters map[types.UID][]*cacheWaiter
}

type cacheEntry struct {
	status   *kubetypes.PodStatus
	err      error
	modified time.Time // when status was taken
	observed time.Time // last time the runtime confirmed it unchanged
}

type cacheResult struct {
	status *kubetypes.PodStatus
	err    error
}

type cacheWaiter struct {
	after time.Time
	ch    chan cacheResult // buffered 1; written once, by the notifier
}

// NewCache returns an empty cache. clock may be nil (the real clock); it is
// kept for callers that stamp statuses with the cache's notion of now.
func NewCache(c clock.Clock) *Cache {
	if c == nil {
		c = clock.RealClock{}
	}
	return &Cache{
		clock:   c,
		pods:    make(map[types.UID]*cacheEntry),
		waiters: make(map[types.UID][]*cacheWaiter),
	}
}

// Get returns the cached status of the pod and the error its last inspection
// gave. A pod without a record yields an empty PodStatus{ID: uid} and nil.
// Callers must not modify the returned status.
func (c *Cache) Get(uid types.UID) (*kubetypes.PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.getLocked(uid)
	return r.status, r.err
}

func (c *Cache) getLocked(uid types.UID) cacheResult {
	e, ok := c.pods[uid]
	if !ok {
		return cacheResult{status: &kubetypes.PodStatus{ID: uid}}
	}
	return cacheResult{status: e.status, err: e.err}
}

// Set stores the status of a pod (or the error inspecting it gave), taken at
// timestamp, and wakes the waiters it satisfies. A record older than the one
// already held is ignored; Set reports whether it stored the record.
func (c *Cache) Set(uid types.UID, status *kubetypes.PodStatus, err error, timestamp time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && e.modified.After(timestamp) {
		return false
	}
	if status == nil && err == nil {
		status = &kubetypes.PodStatus{ID: uid}
	}
	c.pods[uid] = &cacheEntry{status: status, err: err, modified: timestamp, observed: timestamp}
	c.notifyLocked(uid, timestamp)
	return true
}

// SetObservedTime records that the runtime confirmed the pod's record (or its
// absence) unchanged at timestamp, and wakes the waiters that satisfies.
func (c *Cache) SetObservedTime(uid types.UID, timestamp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.pods[uid]; ok && timestamp.After(e.observed) {
		e.observed = timestamp
	}
	c.notifyLocked(uid, timestamp)
}

// seenSince reports whether the cache holds a record of the pod modified
// or observed at or after t.
func (c *Cache) seenSince(uid types.UID, t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	return ok && (!e.modified.Before(t) || !e.observed.Before(t))
}

// Delete forgets the pod's record: Get then returns an empty status.
func (c *Cache) Delete(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// UpdateTime advances the global time: every record, and every absence of
// a record, is at least as new as timestamp. It wakes the waiters satisfied.
// The global time never moves backwards.
func (c *Cache) UpdateTime(timestamp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if timestamp.After(c.global) {
		c.global = timestamp // never backwards: relists and event updates interleave
	}
	for uid := range c.waiters {
		c.notifyLocked(uid, timestamp)
	}
}

// GetNewerThan returns the pod's status once the cache holds a record of it
// newer than t (modified or observed after t), or the global time is newer
// than t. It blocks until then, or until ctx ends (returning ctx.Err()).
//
// A waiter is woken by the Set, SetObservedTime or UpdateTime whose
// timestamp is not before t, as the kubelet's cache does.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubetypes.PodStatus, error) {
	c.mu.Lock()
	if r, ok := c.newerThanLocked(uid, t); ok {
		c.mu.Unlock()
		return r.status, r.err
	}
	w := &cacheWaiter{after: t, ch: make(chan cacheResult, 1)}
	c.waiters[uid] = append(c.waiters[uid], w)
	c.mu.Unlock()

	select {
	case r := <-w.ch:
		return r.status, r.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	removed := c.removeWaiterLocked(uid, w)
	c.mu.Unlock()
	if !removed {
		// Notified while ctx ended: the answer is already there.
		r := <-w.ch
		return r.status, r.err
	}
	return nil, ctx.Err()
}

func (c *Cache) newerThanLocked(uid types.UID, t time.Time) (cacheResult, bool) {
	globalNewer := !c.global.IsZero() && c.global.After(t)
	e, ok := c.pods[uid]
	if !ok {
		if globalNewer {
			return c.getLocked(uid), true
		}
		return cacheResult{}, false
	}
	if globalNewer || e.modified.After(t) || e.observed.After(t) {
		return cacheResult{status: e.status, err: e.err}, true
	}
	return cacheResult{}, false
}

// notifyLocked wakes the waiters of uid that timestamp satisfies.
func (c *Cache) notifyLocked(uid types.UID, timestamp time.Time) {
	list := c.waiters[uid]
	if len(list) == 0 {
		return
	}
	kept := list[:0]
	for _, w := range list {
		if timestamp.Before(w.after) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.getLocked(uid)
	}
	clear(list[len(kept):])
	if len(kept) == 0 {
		delete(c.waiters, uid)
		return
	}
	c.waiters[uid] = kept
}

func (c *Cache) removeWaiterLocked(uid types.UID, w *cacheWaiter) bool {
	list := c.waiters[uid]
	for i, x := range list {
		if x != w {
			continue
		}
		last := len(list) - 1
		copy(list[i:], list[i+1:])
		list[last] = nil
		if last == 0 {
			delete(c.waiters, uid)
		} else {
			c.waiters[uid] = list[:last]
		}
		return true
	}
	return false
}

// waiting reports how many GetNewerThan calls are blocked (for tests).
func (c *Cache) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, l := range c.waiters {
		n += len(l)
	}
	return n
}

// Len reports how many pods the cache holds. A pod's entry is removed by
// Delete, which the PLEG calls once a relist no longer sees the pod.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods)
}
