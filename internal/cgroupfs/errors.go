package cgroupfs

import "errors"

// ErrNoHierarchy: the cgroup root holds neither a unified (v2) hierarchy
// nor a v1 memory controller.
var ErrNoHierarchy = errors.New("cgroupfs: no cgroup hierarchy")
