package topology

import "errors"

var (
	// ErrInvalidCPUSet is returned for a cpuset string that is malformed,
	// too long or names a CPU above MaxCPUID.
	ErrInvalidCPUSet = errors.New("topology: invalid cpuset")
	// ErrInvalidTopology is returned when CPU descriptions are inconsistent
	// (duplicate CPUs, negative ids, a core split across sockets) or when
	// the sysfs files cannot be read or parsed.
	ErrInvalidTopology = errors.New("topology: invalid topology")
)
