//go:build race

package podconfig

// raceEnabled: the race detector slows the tests and makes sync.Pool drop
// objects, so allocation measures carry pool noise.
const raceEnabled = true
