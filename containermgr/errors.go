package containermgr

import (
	"errors"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Functions wrap them with %w; match them with errors.Is.
var (
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
	// ErrStarted: the call is only allowed before Start (SetCgroupDriver).
	ErrStarted = errors.New("containermgr: already started")
	// ErrInvalidConfig: a Config field is wrong (the message names it).
	ErrInvalidConfig = errors.New("containermgr: invalid config")
	// ErrInvalidCgroupName: a cgroup name part is empty, holds '/' or '_',
	// or a literal cgroup path can't be parsed back into a name.
	ErrInvalidCgroupName = errors.New("containermgr: invalid cgroup name")
	// ErrUnsupportedCgroupMode: the cgroup root is not a cgroup hierarchy
	// this package handles (or the version could not be detected).
	ErrUnsupportedCgroupMode = errors.New("containermgr: unsupported cgroup mode")
	// ErrReservationExceedsCapacity: system-reserved + kube-reserved + hard
	// eviction thresholds ask for more than the node has.
	ErrReservationExceedsCapacity = errors.New("containermgr: node allocatable reservation exceeds capacity")
	// ErrCgroupNotFound: the cgroup does not exist.
	ErrCgroupNotFound = errors.New("containermgr: cgroup not found")
	// ErrCgroupBusy: the cgroup still holds processes.
	ErrCgroupBusy = errors.New("containermgr: cgroup still has processes")
	// ErrNotStarted: the answer is known only once Start has run.
	ErrNotStarted = errors.New("containermgr: the container manager has not started")
)
