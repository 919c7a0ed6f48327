package kuberuntime

import (
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// backoff is a per-key exponential back-off (the kubelet's flowcontrol.Backoff
// without jitter, so tests are exact). A key's delay starts at initial and
// doubles on each next() up to max; an entry not updated for 2*max is
// forgotten, which resets the delay.
//
// Wall-clock jumps never stretch a wait beyond the key's delay (at most
// max): when the clock reads earlier than the time a wait counts from (it
// was set back, or an appliance booted in 1970 and NTP moved it on and
// back), the wait is counted from the moment that was noticed instead; an
// entry whose last failure is more than 2*max away in either direction is
// forgotten, as an old one is.
type backoff struct {
	clock        clock.PassiveClock
	initial, max time.Duration

	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
	// lastErr is the message of the failure that started this window (image pulls).
	lastErr string
	// anchor replaces anchorFor, an event time the clock reads as in the
	// future, as the start of the wait (see inBackOffSince).
	anchorFor, anchor time.Time
}

func newBackoff(c clock.PassiveClock, initial, max time.Duration) *backoff {
	return &backoff{clock: c, initial: initial, max: max, entries: make(map[string]*backoffEntry)}
}

func (b *backoff) expired(eventTime time.Time, e *backoffEntry) bool {
	gap := eventTime.Sub(e.lastUpdate)
	return gap > 2*b.max || gap < -2*b.max
}

// next records a failure at eventTime: starts or doubles the delay.
func (b *backoff) next(key string, eventTime time.Time, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e) {
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = b.clock.Now()
	e.lastErr = lastErr
}

// inBackOffSince: is now within the delay counted from eventTime (the
// container's finish time)?
func (b *backoff) inBackOffSince(key string, eventTime time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e) {
		return false, 0
	}
	now := b.clock.Now()
	elapsed := now.Sub(eventTime)
	if elapsed < 0 { // eventTime is "in the future": the clock went back
		if !e.anchorFor.Equal(eventTime) || now.Before(e.anchor) {
			e.anchorFor, e.anchor = eventTime, now
		}
		elapsed = now.Sub(e.anchor)
	}
	return elapsed < e.delay, e.delay
}

// inBackOffSinceUpdate: is now within the delay counted from the last failure?
func (b *backoff) inBackOffSinceUpdate(key string) (in bool, delay time.Duration, lastErr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	now := b.clock.Now()
	if !ok || b.expired(now, e) {
		return false, 0, ""
	}
	if now.Before(e.lastUpdate) { // the clock went back: count from now
		e.lastUpdate = now
	}
	return now.Sub(e.lastUpdate) < e.delay, e.delay, e.lastErr
}

// reset forgets key.
func (b *backoff) reset(key string) {
	b.mu.Lock()
	delete(b.entries, key)
	b.mu.Unlock()
}

// gc drops expired entries.
func (b *backoff) gc() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if b.expired(now, e) {
			delete(b.entries, k)
		}
	}
}

// forgetPrefix drops every key starting with prefix (all keys of a pod).
func (b *backoff) forgetPrefix(prefix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if strings.HasPrefix(k, prefix) {
			delete(b.entries, k)
		}
	}
}

func (b *backoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}
