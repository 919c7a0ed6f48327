package eviction

import (
	"context"
)

// ThresholdNotifier tells the manager at once when a memory signal may have crossed its threshold.
//
// The Summary given to UpdateThreshold is the cycle's own: read it during
// the call, do not keep or change it. UpdateThreshold is called from the
// cycle, so it must not wait for a cycle (trigger never blocks).
type ThresholdNotifier interface {
	// UpdateThreshold re-arms the notifier from this cycle's stats (called after each cycle that had memory stats).
	UpdateThreshold(s *Summary) error
	// Run waits for crossings and calls trigger for each, until ctx ends; it returns after its goroutines exit.
	Run(ctx context.Context, trigger func()) error
}

// WithAllocatableThresholds returns ts followed by an
// allocatableMemory.available hard threshold for each hard
// memory.available threshold, with the same value and minimum reclaim, as
// the kubelet derives them when node allocatable is enforced on the pods
// cgroup. A derived threshold already in ts is not added twice. ts is not
// changed.
func WithAllocatableThresholds(ts []Threshold) []Threshold {
	out := make([]Threshold, 0, len(ts)+1)
	out = append(out, ts...)
	for _, t := range ts {
		if t.Signal != SignalMemoryAvailable || !t.IsHard() {
			continue
		}
		d := Threshold{Signal: SignalAllocatableMemoryAvailable, Operator: t.Operator, Value: copyValue(t.Value)}
		if t.MinReclaim != nil {
			mr := copyValue(*t.MinReclaim)
			d.MinReclaim = &mr
		}
		dup := false
		for _, x := range out {
			if x.key() == d.key() {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, d)
		}
	}
	return out
}

func copyValue(v ThresholdValue) ThresholdValue {
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		v.Quantity = &q
	}
	return v
}
