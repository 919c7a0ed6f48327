package containermgr

import (
	"fmt"
	"strings"
)

// Driver is how cgroup names are spelled for the runtime and on disk.
type Driver string

// The two cgroup drivers of the kubelet.
const (
	// DriverCgroupfs spells {kubepods,burstable,pod1-2} as
	// /kubepods/burstable/pod1-2.
	DriverCgroupfs Driver = "cgroupfs"
	// DriverSystemd spells it as systemd slices:
	// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
	DriverSystemd Driver = "systemd"
)

// maxCgroupNamePart bounds one part of a name (a directory name on Linux).
const maxCgroupNamePart = 255

// CgroupName is a driver-neutral cgroup name: its parts from the top of the
// hierarchy down. The empty name is the root cgroup.
type CgroupName []string

// NewCgroupName returns base extended by parts, checked with Validate.
// The result never shares memory with base.
func NewCgroupName(base CgroupName, parts ...string) (CgroupName, error) {
	n := make(CgroupName, 0, len(base)+len(parts))
	n = append(append(n, base...), parts...)
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return n, nil
}

// Validate reports a part that is empty, longer than 255 bytes, "." or "..",
// or holds '/', '_' or a NUL: '/' would change the depth and '_' could not be
// told apart from an escaped '-' in the systemd spelling.
func (n CgroupName) Validate() error {
	for i, p := range n {
		switch {
		case p == "":
			return fmt.Errorf("%w: part %d is empty", ErrInvalidCgroupName, i)
		case len(p) > maxCgroupNamePart:
			return fmt.Errorf("%w: part %d is longer than %d bytes", ErrInvalidCgroupName, i, maxCgroupNamePart)
		case p == "." || p == "..":
			return fmt.Errorf("%w: part %d is %q", ErrInvalidCgroupName, i, p)
		case strings.ContainsAny(p, "/_\x00"):
			return fmt.Errorf("%w: part %d (%q) holds '/', '_' or NUL", ErrInvalidCgroupName, i, p)
		}
	}
	return nil
}

// ToCgroupfs spells the name as a cgroupfs path: "/" for the root, else
// "/a/b/c".
func (n CgroupName) ToCgroupfs() string {
	return "/" + strings.Join(n, "/")
}

// ToSystemd spells the name as nested systemd slices: each level is the
// dash-joined prefix of the parts with '-' in a part escaped to '_', so
// {kubepods,burstable,pod1-2} becomes
// /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice.
// The root is "/".
func (n CgroupName) ToSystemd() string {
	if len(n) == 0 {
		return "/"
	}
	var b strings.Builder
	prefix := ""
	for _, p := range n {
		esc := strings.ReplaceAll(p, "-", "_")
		if prefix == "" {
			prefix = esc
		} else {
			prefix += "-" + esc
		}
		b.WriteByte('/')
		b.WriteString(prefix)
		b.WriteString(".slice")
	}
	return b.String()
}

// Spell returns the name in the driver's syntax.
func (n CgroupName) Spell(d Driver) string {
	if d == DriverSystemd {
		return n.ToSystemd()
	}
	return n.ToCgroupfs()
}

// maxLiteralName bounds a literal cgroup path given to the parsers.
const maxLiteralName = 4096

// ParseCgroupfs turns "/a/b/c" (leading and trailing '/' optional) back into
// a CgroupName. "/" and "" are the root.
func ParseCgroupfs(s string) (CgroupName, error) {
	if len(s) > maxLiteralName {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidCgroupName, maxLiteralName)
	}
	s = strings.Trim(s, "/")
	if s == "" {
		return CgroupName{}, nil
	}
	n := CgroupName(strings.Split(s, "/"))
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return n, nil
}

// ParseSystemd turns a systemd slice path (or just its last element) back
// into a CgroupName: "kubepods-burstable-pod1_2.slice" gives
// {kubepods,burstable,pod1-2}. "/" and "" are the root. When the whole path
// is given, each level must be the prefix slice of the next.
func ParseSystemd(s string) (CgroupName, error) {
	if len(s) > maxLiteralName {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalidCgroupName, maxLiteralName)
	}
	t := strings.Trim(s, "/")
	if t == "" {
		return CgroupName{}, nil
	}
	levels := strings.Split(t, "/")
	last := levels[len(levels)-1]
	base, ok := strings.CutSuffix(last, ".slice")
	if !ok || base == "" {
		return nil, fmt.Errorf("%w: %q is not a systemd slice", ErrInvalidCgroupName, last)
	}
	parts := strings.Split(base, "-")
	if len(levels) > 1 && len(levels) != len(parts) {
		return nil, fmt.Errorf("%w: %q: %d levels for %d name parts", ErrInvalidCgroupName, s, len(levels), len(parts))
	}
	n := make(CgroupName, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: %q has an empty part", ErrInvalidCgroupName, s)
		}
		n[i] = strings.ReplaceAll(p, "_", "-")
	}
	if len(levels) > 1 {
		want := strings.Split(strings.Trim(n.ToSystemd(), "/"), "/")
		for i := range levels {
			if levels[i] != want[i] {
				return nil, fmt.Errorf("%w: %q: level %q does not match %q", ErrInvalidCgroupName, s, levels[i], want[i])
			}
		}
	}
	if err := n.Validate(); err != nil {
		return nil, err
	}
	return n, nil
}

// ParseName parses a literal in the driver's syntax.
func ParseName(d Driver, s string) (CgroupName, error) {
	if d == DriverSystemd {
		return ParseSystemd(s)
	}
	return ParseCgroupfs(s)
}
