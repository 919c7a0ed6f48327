package topology

import (
	"fmt"
	"strings"
)

// Hint is a NUMA affinity a resource manager can satisfy a container's
// request with (the kubelet's TopologyHint): the set of NUMA node IDs,
// sorted, and whether it is one of the narrowest such sets.
type Hint struct {
	NUMANodes []int
	Preferred bool
}

// String renders the hint as "{0,1 preferred}".
func (h Hint) String() string {
	ids := make([]string, len(h.NUMANodes))
	for i, n := range h.NUMANodes {
		ids[i] = fmt.Sprint(n)
	}
	s := "{" + strings.Join(ids, ",")
	if h.Preferred {
		s += " preferred"
	}
	return s + "}"
}
