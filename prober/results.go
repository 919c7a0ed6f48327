package prober

import (
	"sync"
)

// resultKey names one probe result: the raw CRI container id and the type.
type resultKey struct {
	id string
	t  ProbeType
}

// results holds the latest result of every running probe worker, keyed by
// the raw container id so that both the runtime (CRI ids) and the status
// (API ids, stripped) find them.
type results struct {
	mu sync.RWMutex
	m  map[resultKey]Result
}

func newResults() *results { return &results{m: make(map[resultKey]Result)} }

func (r *results) get(id string, t ProbeType) (Result, bool) {
	r.mu.RLock()
	v, ok := r.m[resultKey{rawID(id), t}]
	r.mu.RUnlock()
	return v, ok
}

// set stores v and reports whether it differs from what was stored (an
// absent entry counts as different).
func (r *results) set(id string, t ProbeType, v Result) bool {
	k := resultKey{rawID(id), t}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.m[k]
	if ok && old == v {
		return false
	}
	r.m[k] = v
	return true
}

func (r *results) remove(id string, t ProbeType) {
	r.mu.Lock()
	delete(r.m, resultKey{rawID(id), t})
	r.mu.Unlock()
}
