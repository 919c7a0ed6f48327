package eviction

import (
	"context"
	"slices"
	"sync"
)

// FakeStats is a StatsProvider for tests: Summary returns what was last
// set. It is safe for concurrent use; the zero value returns an empty
// Summary.
type FakeStats struct {
	mu    sync.Mutex
	s     *Summary
	err   error
	calls int
}

// NewFakeStats returns a FakeStats that returns s.
func NewFakeStats(s *Summary) *FakeStats {
	f := &FakeStats{}
	f.Set(s)
	return f
}

// Set makes Summary return a copy of s (nil: an empty Summary) and no
// error. s is copied, so the caller may change it afterwards.
func (f *FakeStats) Set(s *Summary) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.s, f.err = copySummary(s), nil
}

// SetError makes Summary fail with err (nil: return the summary again).
func (f *FakeStats) SetError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Calls is how many times Summary was called.
func (f *FakeStats) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Summary returns a copy of the summary set, or the error set.
func (f *FakeStats) Summary(ctx context.Context) (*Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return copySummary(f.s), nil
}

var _ StatsProvider = (*FakeStats)(nil)

// copySummary deep-copies s; nil gives an empty Summary.
func copySummary(s *Summary) *Summary {
	if s == nil {
		return &Summary{}
	}
	c := *s
	ptr := func(p *FsStats) *FsStats {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	if s.Memory != nil {
		v := *s.Memory
		c.Memory = &v
	}
	if s.AllocatableMemory != nil {
		v := *s.AllocatableMemory
		c.AllocatableMemory = &v
	}
	c.NodeFs, c.ImageFs, c.ContainerFs = ptr(s.NodeFs), ptr(s.ImageFs), ptr(s.ContainerFs)
	if s.PID != nil {
		v := *s.PID
		c.PID = &v
	}
	if s.Pods != nil {
		c.Pods = make([]PodStats, len(s.Pods))
		for i, p := range s.Pods {
			p.Containers = slices.Clone(p.Containers)
			p.Volumes = slices.Clone(p.Volumes)
			c.Pods[i] = p
		}
	}
	return &c
}
