package volumemgr

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func TestOpenSubPathResolution(t *testing.T) {
	base := t.TempDir()
	vol := filepath.Join(base, "vol")
	out := outsideDir(t)
	plugMust(t, os.MkdirAll(filepath.Join(vol, "data/inner"), 0o755))
	plugMust(t, os.WriteFile(filepath.Join(vol, "data/inner/f"), []byte("in"), 0o644))
	plugMust(t, os.Symlink("data/inner", filepath.Join(vol, "inside-rel")))           // stays inside
	plugMust(t, os.Symlink(out, filepath.Join(vol, "abs-out")))                       // absolute, outside
	plugMust(t, os.Symlink("../../etc", filepath.Join(vol, "data/rel-out")))          // relative escape
	plugMust(t, os.Symlink(filepath.Join(vol, "data"), filepath.Join(vol, "abs-in"))) // absolute even if inside
	plugMust(t, os.Symlink("/proc/self/root/etc", filepath.Join(vol, "magic")))

	okCases := map[string]string{"data/inner/f": "in", "inside-rel/f": "in"}
	for sub, want := range okCases {
		fd, err := OpenSubPath(vol, sub)
		if err != nil {
			t.Fatalf("%s: %v", sub, err)
		}
		b, err := os.ReadFile("/proc/self/fd/" + strconv.Itoa(fd))
		unix.Close(fd)
		if err != nil || string(b) != want {
			t.Fatalf("%s read %q %v", sub, b, err)
		}
	}
	for _, sub := range []string{"abs-out", "abs-out/passwd", "data/rel-out", "data/rel-out/passwd", "abs-in", "magic"} {
		fd, err := OpenSubPath(vol, sub)
		if err == nil {
			unix.Close(fd)
			t.Errorf("%s resolved", sub)
			continue
		}
		if !errors.Is(err, ErrPathEscape) {
			t.Errorf("%s: %v, want ErrPathEscape", sub, err)
		}
	}
	for _, sub := range []string{"../vol", "/etc", "data/../data", ""} {
		if _, err := OpenSubPath(vol, sub); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q: %v, want ErrUnsafePath", sub, err)
		}
	}
	if _, err := OpenSubPath(vol, "missing"); err == nil || errors.Is(err, ErrPathEscape) {
		t.Errorf("missing: %v", err)
	}
	// The volume dir itself must not be a symlink.
	plugMust(t, os.Symlink(out, filepath.Join(base, "linkvol")))
	if _, err := OpenSubPath(filepath.Join(base, "linkvol"), "passwd"); err == nil {
		t.Fatal("resolved below a symlinked volume dir")
	}
}

func TestSubPathTarget(t *testing.T) {
	got, err := SubPathTarget("/var/lib/kubelet/pods/uid", "vol", "ctr", 2)
	if err != nil || got != "/var/lib/kubelet/pods/uid/volume-subpaths/vol/ctr/2" {
		t.Fatal(got, err)
	}
	for _, bad := range [][3]string{{"rel", "v", "c"}, {"/p", "../v", "c"}, {"/p", "v", "c/d"}} {
		if _, err := SubPathTarget(bad[0], bad[1], bad[2], 0); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, err := SubPathTarget("/p", "v", "c", -1); !errors.Is(err, ErrUnsafePath) {
		t.Error(err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/a\040b\134c\011`); got != "/a b\\c\t" {
		t.Fatalf("%q", got)
	}
	if got := unescapeMountinfo(`/x\04`); got != `/x\04` {
		t.Fatalf("%q", got)
	}
}
