package topology

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// Bounds on cpuset strings read from outside (sysfs, checkpoints, config).
// They are checked before anything is allocated, so "0-20000000" is an
// error rather than a 20-million-entry set.
const (
	// MaxCPUID is the largest CPU number accepted (the Linux default
	// NR_CPUS upper bound is 8192).
	MaxCPUID = 8191
	// MaxCPUSetLen is the longest cpuset string accepted, in bytes.
	MaxCPUSetLen = 64 << 10
)

// ParseCPUSet parses the Linux list format ("0-3,8,10-11"; "" is the empty
// set) with the bounds above. Spaces, signs, empty elements, reversed
// ranges and numbers above MaxCPUID are errors wrapping ErrInvalidCPUSet.
// A trailing newline (as sysfs files end) is accepted.
func ParseCPUSet(s string) (cpuset.CPUSet, error) {
	if len(s) > MaxCPUSetLen {
		return cpuset.New(), fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidCPUSet, len(s), MaxCPUSetLen)
	}
	if n := len(s); n > 0 && s[n-1] == '\n' {
		s = s[:n-1]
	}
	if s == "" {
		return cpuset.New(), nil
	}
	var seen [MaxCPUID + 1]bool
	count := 0
	for i := 0; i <= len(s); {
		lo, next, err := parseCPUID(s, i)
		if err != nil {
			return cpuset.New(), err
		}
		hi := lo
		if next < len(s) && s[next] == '-' {
			hi, next, err = parseCPUID(s, next+1)
			if err != nil {
				return cpuset.New(), err
			}
			if hi < lo {
				return cpuset.New(), fmt.Errorf("%w: reversed range %d-%d", ErrInvalidCPUSet, lo, hi)
			}
		}
		for c := lo; c <= hi; c++ {
			if !seen[c] {
				seen[c] = true
				count++
			}
		}
		if next == len(s) {
			break
		}
		if s[next] != ',' {
			return cpuset.New(), fmt.Errorf("%w: unexpected %q at offset %d", ErrInvalidCPUSet, s[next], next)
		}
		i = next + 1
	}
	ids := make([]int, 0, count)
	for c, ok := range seen {
		if ok {
			ids = append(ids, c)
		}
	}
	return cpuset.New(ids...), nil
}

// parseCPUID reads a decimal CPU number at s[i:] and returns it with the
// offset after it.
func parseCPUID(s string, i int) (int, int, error) {
	start, v := i, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		v = v*10 + int(s[i]-'0')
		if v > MaxCPUID {
			return 0, 0, fmt.Errorf("%w: cpu number at offset %d above %d", ErrInvalidCPUSet, start, MaxCPUID)
		}
		i++
	}
	if i == start {
		return 0, 0, fmt.Errorf("%w: expected a cpu number at offset %d", ErrInvalidCPUSet, start)
	}
	return v, i, nil
}
