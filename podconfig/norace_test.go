//go:build !race

package podconfig

const raceEnabled = false
