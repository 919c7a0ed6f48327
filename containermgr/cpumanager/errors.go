package cpumanager

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

var (
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrInvalidConfig is returned by New for a bad Config; the message
	// names the field.
	ErrInvalidConfig = errors.New("cpumanager: invalid config")
	// ErrNotStarted is returned by the methods that need the state before
	// Start has loaded it.
	ErrNotStarted = errors.New("cpumanager: not started")
	// ErrNotEnoughCPUs is returned when an exclusive request cannot be met
	// from the free CPUs (the kubelet's "not enough cpus available").
	ErrNotEnoughCPUs = errors.New("cpumanager: not enough cpus available")
	// ErrCorruptState is returned when a checkpoint decodes but its content
	// is wrong (bad JSON, bad cpusets, another policy, inconsistent sets).
	// Start sets such a file aside and starts fresh.
	ErrCorruptState = errors.New("cpumanager: corrupt state")
)
