package memorymanager

import "errors"

var (
	// ErrInvalidConfig is returned by New for a bad Config; the message
	// names the field.
	ErrInvalidConfig = errors.New("memorymanager: invalid config")
	// ErrInvalidReservedMemory is returned when the per-NUMA reserved
	// memory does not add up to the node allocatable reservation.
	ErrInvalidReservedMemory = errors.New("memorymanager: invalid reserved memory")
	// ErrNotStarted is returned before Start has loaded the state.
	ErrNotStarted = errors.New("memorymanager: not started")
	// ErrNoFit is returned when no NUMA node (or group of nodes) has the
	// memory a container asks for.
	ErrNoFit = errors.New("memorymanager: no NUMA node can satisfy the request")
	// ErrCorruptState is returned for a checkpoint whose content is wrong.
	ErrCorruptState = errors.New("memorymanager: corrupt state")
	// ErrMachine is returned when the NUMA memory cannot be read from sysfs.
	ErrMachine = errors.New("memorymanager: cannot read machine memory")
)
