package syncloop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestPodDirsUnsafeUIDs(t *testing.T) {
	root := t.TempDir()
	d := podDirs{root: root}
	for _, uid := range []types.UID{"", ".", "..", "a/b", "../x", "a\x00b", `a\b`} {
		if err := d.ensure(uid); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("ensure %q: %v", uid, err)
		}
		if _, err := d.remove(uid); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("remove %q: %v", uid, err)
		}
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("something was made: %v", entries)
	}
	if p, err := PodDir("/var/lib/nodekit", "1234"); err != nil || p != "/var/lib/nodekit/pods/1234" {
		t.Fatalf("PodDir %q %v", p, err)
	}
	if err := (&podDirs{}).ensure("x"); err != nil {
		t.Fatal("no root must be a no-op")
	}
}

func TestPodDirsLifecycle(t *testing.T) {
	root := t.TempDir()
	d := podDirs{root: root}
	if uids, err := d.list(); err != nil || len(uids) != 0 {
		t.Fatalf("list before any: %v %v", uids, err)
	}
	for _, uid := range []types.UID{"a", "b"} {
		if err := d.ensure(uid); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"", "containers"} {
		fi, err := os.Stat(filepath.Join(root, "pods", "a", sub))
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
			t.Fatalf("%s: %v %v", sub, fi, err)
		}
	}
	for _, sub := range []string{"volumes", "plugins"} {
		if _, err := os.Stat(filepath.Join(root, "pods", "a", sub)); !os.IsNotExist(err) {
			t.Fatalf("%s made for a pod with nothing to mount: %v", sub, err)
		}
	}
	if uids, _ := d.list(); len(uids) != 2 {
		t.Fatalf("list %v", uids)
	}
	// a: empty volume dirs and container files go.
	_ = os.MkdirAll(filepath.Join(root, "pods", "a", "volumes", "kubernetes.io~empty-dir", "cache"), 0o750)
	_ = os.WriteFile(filepath.Join(root, "pods", "a", "containers", "log"), []byte("x"), 0o600)
	_ = os.WriteFile(filepath.Join(root, "pods", "a", "etc-hosts"), []byte("x"), 0o600)
	if gone, err := d.remove("a"); err != nil || !gone {
		t.Fatalf("remove a: %v %v", gone, err)
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "a")); !os.IsNotExist(err) {
		t.Fatal("a still there")
	}
	// b: a file in a volume (a volume still mounted) keeps the directory
	// and the file.
	vol := filepath.Join(root, "pods", "b", "volumes", "kubernetes.io~empty-dir", "data", "important")
	_ = os.MkdirAll(filepath.Dir(vol), 0o750)
	_ = os.WriteFile(vol, []byte("keep"), 0o600)
	if gone, err := d.remove("b"); err != nil || gone {
		t.Fatalf("remove b: %v %v", gone, err)
	}
	if b, err := os.ReadFile(vol); err != nil || string(b) != "keep" {
		t.Fatal("volume content touched")
	}
	if _, err := os.Stat(filepath.Join(root, "pods", "b", "containers")); !os.IsNotExist(err) {
		t.Fatal("containers dir of b kept")
	}
	if gone, err := d.remove("never-made"); err != nil || !gone {
		t.Fatalf("remove of a missing dir: %v %v", gone, err)
	}
}

// ensure touches the file system once per pod: a pod directory removed
// behind its back is not remade, until remove forgets the pod.
func TestPodDirsEnsureOncePerPod(t *testing.T) {
	root := t.TempDir()
	d := &podDirs{root: root}
	if err := d.ensure("a"); err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(root, "pods", "a", "containers")
	if err := os.Remove(vols); err != nil {
		t.Fatal(err)
	}
	if err := d.ensure("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(vols); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("second ensure went to the file system: %v", err)
	}
	if gone, err := d.remove("a"); err != nil || !gone {
		t.Fatalf("remove: %v %v", gone, err)
	}
	if err := d.ensure("a"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(vols); err != nil || !fi.IsDir() {
		t.Fatalf("ensure after remove did not remake the directories: %v", err)
	}
}
