package volumemgr

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateItemPathRejects(t *testing.T) {
	long := strings.Repeat("a", MaxSegmentLength+1)
	cases := []string{
		"", "/etc/passwd", "..", "../x", "a/../../x", "a/..", "a//b", "a/", "./a", "a/./b",
		"..data", "..data/x", "..2024_01_01", "...", "a\x00b", long, "a/" + long,
		strings.Repeat("a/", MaxPathLength/2+1) + "a",
	}
	for _, c := range cases {
		if err := ValidateItemPath(c); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("ValidateItemPath(%q) = %v, want ErrUnsafePath", truncForError(c), err)
		}
	}
	for _, ok := range []string{"a", "a/b/c", "a..b", "a/..b", ".hidden", "x/..data", strings.Repeat("a", MaxSegmentLength)} {
		if err := ValidateItemPath(ok); err != nil {
			t.Errorf("ValidateItemPath(%q) = %v, want nil", ok, err)
		}
	}
}

func TestValidateSubPathAndSegment(t *testing.T) {
	for _, bad := range []string{"", "/abs", "..", "a/../b", "a//b", "a\x00", "./a"} {
		if err := ValidateSubPath(bad); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("ValidateSubPath(%q) = %v", bad, err)
		}
	}
	for _, ok := range []string{"a", "..data/x", "a/b", "...", "..foo"} {
		if err := ValidateSubPath(ok); err != nil {
			t.Errorf("ValidateSubPath(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00", strings.Repeat("x", 256)} {
		if err := ValidateSegment(bad); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("ValidateSegment(%q) = %v", bad, err)
		}
	}
	if err := ValidateSegment("vol-1"); err != nil {
		t.Error(err)
	}
}

// FuzzValidatePaths: validation never panics, and every accepted item path
// or subPath stays strictly below the dir it is joined to, unchanged by
// cleaning.
func FuzzValidatePaths(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/etc", "a//b", "..data", "x/..", "a\x00", ".", "..a/b", "ä/ö"} {
		f.Add(s)
	}
	const base = "/vol"
	f.Fuzz(func(t *testing.T, p string) {
		check := func(kind string, err error) {
			if err != nil {
				if !errors.Is(err, ErrUnsafePath) {
					t.Fatalf("%s(%q): error %v is not ErrUnsafePath", kind, p, err)
				}
				return
			}
			joined := filepath.Join(base, p)
			if !strings.HasPrefix(joined, base+"/") || joined != base+"/"+p {
				t.Fatalf("%s accepted %q, which joins to %q", kind, p, joined)
			}
			if strings.ContainsRune(p, 0) || len(p) > MaxPathLength {
				t.Fatalf("%s accepted %q", kind, p)
			}
		}
		check("ValidateItemPath", ValidateItemPath(p))
		check("ValidateSubPath", ValidateSubPath(p))
		if ValidateItemPath(p) == nil && strings.HasPrefix(p, "..") {
			t.Fatalf("item path %q starts with ..", p)
		}
		if ValidateSegment(p) == nil && (strings.ContainsRune(p, '/') || p == "." || p == "..") {
			t.Fatalf("segment %q accepted", p)
		}
	})
}
