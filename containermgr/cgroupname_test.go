package containermgr

import (
	"errors"
	"path"
	"testing"
)

func mustName(t testing.TB, parts ...string) CgroupName {
	t.Helper()
	n, err := NewCgroupName(nil, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The systemd spelling: each level is the dash-joined prefix, '-' in a part
// becomes '_'.
func TestCgroupNameToSystemd(t *testing.T) {
	cases := []struct {
		parts []string
		want  string
	}{
		{nil, "/"},
		{[]string{"Burstable"}, "/Burstable.slice"},
		{[]string{"Burstable", "pod-123"}, "/Burstable.slice/Burstable-pod_123.slice"},
		{[]string{"kubepods", "burstable", "pod1-2"}, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"},
		{[]string{"test", "a", "b"}, "/test.slice/test-a.slice/test-a-b.slice"},
		{[]string{"BestEffort", "pod-6c1a4e95-6bb6-11e6-bc26-28d2444e470d"}, "/BestEffort.slice/BestEffort-pod_6c1a4e95_6bb6_11e6_bc26_28d2444e470d.slice"},
	}
	for _, c := range cases {
		n := mustName(t, c.parts...)
		if got := n.ToSystemd(); got != c.want {
			t.Errorf("%v: ToSystemd = %q, want %q", c.parts, got, c.want)
		}
		back, err := ParseSystemd(c.want)
		if err != nil || back.ToSystemd() != c.want || len(back) != len(c.parts) {
			t.Errorf("ParseSystemd(%q) = %v, %v", c.want, back, err)
		}
		back, err = ParseSystemd(path.Base(c.want))
		if err != nil || back.ToSystemd() != c.want {
			t.Errorf("ParseSystemd(base of %q) = %v, %v", c.want, back, err)
		}
	}
}

func TestCgroupNameToCgroupfs(t *testing.T) {
	n := mustName(t, "kubepods", "burstable", "pod1-2")
	if got := n.ToCgroupfs(); got != "/kubepods/burstable/pod1-2" {
		t.Fatalf("ToCgroupfs = %q", got)
	}
	if got := (CgroupName{}).ToCgroupfs(); got != "/" {
		t.Fatalf("root = %q", got)
	}
	back, err := ParseCgroupfs("/kubepods/burstable/pod1-2/")
	if err != nil || back.ToCgroupfs() != "/kubepods/burstable/pod1-2" {
		t.Fatalf("ParseCgroupfs = %v, %v", back, err)
	}
	if root, err := ParseName(DriverCgroupfs, "/"); err != nil || len(root) != 0 {
		t.Fatalf("root parse = %v, %v", root, err)
	}
	if n.Spell(DriverSystemd) != n.ToSystemd() || n.Spell(DriverCgroupfs) != n.ToCgroupfs() {
		t.Fatal("Spell does not follow the driver")
	}
}

// Bad names are errors, never panics.
func TestCgroupNameRejectsBadParts(t *testing.T) {
	for _, p := range []string{"a/b", "a_b", "", ".", "..", "x\x00y", string(make([]byte, 256))} {
		if _, err := NewCgroupName(CgroupName{"kubepods"}, p); !errors.Is(err, ErrInvalidCgroupName) {
			t.Errorf("part %q: err = %v, want ErrInvalidCgroupName", p, err)
		}
	}
	for _, s := range []string{"/a_b", "/a/../b"} {
		if _, err := ParseCgroupfs(s); !errors.Is(err, ErrInvalidCgroupName) {
			t.Errorf("ParseCgroupfs(%q): err = %v", s, err)
		}
	}
	for _, s := range []string{"kubepods", "a--b.slice", ".slice", "/a.slice/b-c.slice", "/x.slice/a-b.slice"} {
		if _, err := ParseSystemd(s); !errors.Is(err, ErrInvalidCgroupName) {
			t.Errorf("ParseSystemd(%q): err = %v", s, err)
		}
	}
	// NewCgroupName copies: appending to the result never touches base.
	base := make(CgroupName, 1, 4)
	base[0] = "kubepods"
	a, _ := NewCgroupName(base, "a")
	b, _ := NewCgroupName(base, "b")
	if a[1] != "a" || b[1] != "b" {
		t.Fatalf("shared backing array: %v %v", a, b)
	}
}

func FuzzParseCgroupName(f *testing.F) {
	for _, s := range []string{"/", "/kubepods/burstable/pod1-2", "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice", "a--b.slice", "_.slice"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseCgroupfs(s); err == nil {
			if n.Validate() != nil {
				t.Fatalf("ParseCgroupfs(%q) gave an invalid name %v", s, n)
			}
			if again, err := ParseCgroupfs(n.ToCgroupfs()); err != nil || again.ToCgroupfs() != n.ToCgroupfs() {
				t.Fatalf("cgroupfs round trip of %q: %v %v", s, again, err)
			}
		}
		if n, err := ParseSystemd(s); err == nil {
			if n.Validate() != nil {
				t.Fatalf("ParseSystemd(%q) gave an invalid name %v", s, n)
			}
			if again, err := ParseSystemd(n.ToSystemd()); err != nil || again.ToSystemd() != n.ToSystemd() {
				t.Fatalf("systemd round trip of %q: %v %v", s, again, err)
			}
		}
	})
}
