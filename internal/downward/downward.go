package downward

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ErrUnsupported is returned for a resourceFieldRef this package cannot
// resolve: an unknown resource, a missing container, a bad divisor, or an
// unset limit when the node's allocatable is unknown.
var ErrUnsupported = errors.New("downward: unsupported resourceFieldRef")

// FormatMap renders labels or annotations as the downward API does: sorted
// key="value" lines, the value Go-quoted, no trailing newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(k)
		sb.WriteByte('=')
		sb.WriteString(strconv.Quote(m[k]))
	}
	return sb.String()
}

// Container returns the pod's container (regular or init) with this name,
// or nil.
func Container(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for _, list := range [][]v1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// ResourceValue resolves ref (limits.<r> or requests.<r> for cpu, memory,
// ephemeral-storage and hugepages-<size>) against container c: the quantity
// divided by the divisor (default 1), rounded up. A cpu, memory or
// ephemeral-storage limit the container does not set reads as the node's
// allocatable amount, as in the kubelet; allocatable may be nil only if no
// such fallback is needed.
func ResourceValue(c *v1.Container, ref *v1.ResourceFieldSelector, allocatable func() v1.ResourceList) (string, error) {
	if c == nil || ref == nil {
		return "", fmt.Errorf("%w: no container", ErrUnsupported)
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("%w: resource %q", ErrUnsupported, ref.Resource)
	}
	name := v1.ResourceName(res)
	hugePages := strings.HasPrefix(res, v1.ResourceHugePagesPrefix)
	if name != v1.ResourceCPU && name != v1.ResourceMemory && name != v1.ResourceEphemeralStorage && !hugePages {
		return "", fmt.Errorf("%w: resource %q", ErrUnsupported, ref.Resource)
	}
	var q resource.Quantity
	if kind == "requests" {
		q = c.Resources.Requests[name]
	} else if v, ok := c.Resources.Limits[name]; ok && !v.IsZero() {
		q = v
	} else if !hugePages {
		if allocatable == nil {
			return "", fmt.Errorf("%w: container %q has no %s limit and the node's allocatable is unknown", ErrUnsupported, c.Name, res)
		}
		q = allocatable()[name]
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if divisor.Sign() < 0 {
		return "", fmt.Errorf("%w: %q: negative divisor", ErrUnsupported, ref.Resource)
	}
	var num, den int64
	if name == v1.ResourceCPU {
		num, den = boundedMilli(q), boundedMilli(divisor)
	} else {
		num, den = q.Value(), divisor.Value()
	}
	if den <= 0 {
		return "", fmt.Errorf("%w: %q: divisor out of range", ErrUnsupported, ref.Resource)
	}
	return strconv.FormatInt(CeilDiv(num, den), 10), nil
}

// boundedMilli is q's milli value, clamped to [0, MaxInt64/1000] so that
// huge quantities cannot overflow.
func boundedMilli(q resource.Quantity) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	if q.Cmp(*resource.NewQuantity(math.MaxInt64/1000, resource.DecimalSI)) > 0 {
		return math.MaxInt64 / 1000 * 1000
	}
	return q.MilliValue()
}

// CeilDiv is ceil(a/b) for b > 0 (0 for a <= 0), without overflow.
func CeilDiv(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a/b + min(a%b, 1)
}
