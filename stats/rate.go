package stats

import "sync"

// rateCache keeps the previous CPU sample of each container, pod and
// system container, to turn cumulative CPU time into usageNanoCores as
// the kubelet does when the runtime reports no rate: the rate over the
// interval between two Summary calls. An entry not seen by a Summary is
// dropped at its end (the container went), so the cache holds at most
// what the last Summary saw.
type rateCache struct {
	mu      sync.Mutex
	gen     uint64
	samples map[string]cpuSample
}

type cpuSample struct {
	at      int64 // unix ns of the reading
	total   uint64
	rate    uint64
	hasRate bool
	seen    uint64 // generation of the last Summary that saw it
}

// begin starts a Summary and returns its generation.
func (c *rateCache) begin() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.samples == nil {
		c.samples = map[string]cpuSample{}
	}
	return c.gen
}

// rate records the sample total (ns of CPU) taken at (unix ns) for key
// and returns the rate in nanocores since the previous sample; ok is
// false for the first sample, or when the total went back (a new instance
// under the same key). A sample no newer than the kept one keeps the
// kept rate.
func (c *rateCache) rate(gen uint64, key string, at int64, total uint64) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.samples[key]
	if ok && at <= old.at && total >= old.total {
		old.seen = gen
		c.samples[key] = old
		return old.rate, old.hasRate
	}
	s := cpuSample{at: at, total: total, seen: gen}
	if ok && total >= old.total {
		s.rate = uint64(float64(total-old.total) / float64(at-old.at) * 1e9)
		s.hasRate = true
	}
	c.samples[key] = s
	return s.rate, s.hasRate
}

// end drops the samples the Summary of generation gen and every later one
// did not see.
func (c *rateCache) end(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, s := range c.samples {
		if s.seen < gen {
			delete(c.samples, k)
		}
	}
}

func (c *rateCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.samples)
}
