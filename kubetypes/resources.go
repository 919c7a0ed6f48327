package kubetypes

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounds on the page size written in a hugepages-<size> resource name. The
// size is checked as text before it is parsed: resource.ParseQuantity takes
// time linear in a written exponent, so "hugepages-1e-99999999" would cost
// seconds on every parse.
const (
	// MaxHugePageSizeLength bounds the <size> text of a hugepages-<size>
	// name ("2Mi", "1Gi", "16Gi" are 2 to 4 bytes).
	MaxHugePageSizeLength = 32
	// MaxHugePageSize is the largest page size accepted (16 GiB is the
	// largest any architecture has).
	MaxHugePageSize = 1 << 40
)

// HugePageSize returns the page size in bytes named by a hugepages-<size>
// resource name. It checks the text of <size> before parsing it: at most
// MaxHugePageSizeLength bytes, digits with an optional unit suffix only (no
// exponent form, no sign), a whole positive number of bytes no larger than
// MaxHugePageSize. A name without the prefix, or a bad size, is an error
// naming the resource and wrapping ErrInvalidResourceName.
func HugePageSize(name v1.ResourceName) (int64, error) {
	size, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not a hugepages-<size> resource", ErrInvalidResourceName, name)
	}
	if err := checkPageSizeText(size); err != nil {
		return 0, fmt.Errorf("%w: %q: %s", ErrInvalidResourceName, truncate(string(name), 80), err)
	}
	q, err := resource.ParseQuantity(size)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: page size: %w", ErrInvalidResourceName, name, err)
	}
	if q.Sign() <= 0 || q.Cmp(*resource.NewQuantity(MaxHugePageSize, resource.BinarySI)) > 0 {
		return 0, fmt.Errorf("%w: %q: page size must be between 1 byte and %d bytes", ErrInvalidResourceName, name, int64(MaxHugePageSize))
	}
	v, ok := q.AsInt64()
	if !ok || v <= 0 {
		return 0, fmt.Errorf("%w: %q: page size is not a whole number of bytes", ErrInvalidResourceName, name)
	}
	return v, nil
}

// checkPageSizeText accepts digits, optionally one '.', then an optional
// suffix of at most two letters (Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E).
func checkPageSizeText(s string) error {
	if s == "" {
		return fmt.Errorf("page size is empty")
	}
	if len(s) > MaxHugePageSizeLength {
		return fmt.Errorf("page size of %d bytes, the limit is %d", len(s), MaxHugePageSizeLength)
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return fmt.Errorf("page size must start with a digit")
	}
	switch s[i:] {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E":
		return nil
	}
	return fmt.Errorf("page size suffix %q is not a unit (Ki, Mi, Gi, ... or k, M, G, ...)", truncate(s[i:], 16))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
