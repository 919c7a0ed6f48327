//go:build e2e

package volumemgr

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Root: a memory emptyDir whose volume dir was pre-seeded as a symlink
// (issue 23, item 4) mounts no tmpfs on the link's target, and TearDown
// leaves nothing mounted.
func TestPluginsTmpfsNotMountedThroughSymlink(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	plugins := DefaultPlugins(PluginsConfig{Mounter: &SystemMounter{}})
	vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	p, err := FindPlugin(plugins, vol)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "pods/uid-1/volumes", EscapePluginName(p.Name()), "mem")
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if line := mountinfoLine(t, target); line != "" {
			_ = (&SystemMounter{}).Unmount(target)
		}
	})
	pod := &v1.Pod{}
	pod.UID = "uid-1"
	if err := p.SetUp(t.Context(), pod, vol, dir); !errors.Is(err, ErrPathEscape) {
		t.Fatalf("SetUp through a symlink = %v, want ErrPathEscape", err)
	}
	if line := mountinfoLine(t, target); line != "" {
		t.Fatalf("tmpfs mounted on the symlink's target: %s", line)
	}
	if err := p.TearDown(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if line := mountinfoLine(t, target); line != "" {
		t.Fatalf("still mounted after TearDown: %s", line)
	}
}

// Root: SystemMounter mounts through one O_NOFOLLOW descriptor, so a
// target that is a symlink (for instance swapped in after the plugin
// checked it) gets no tmpfs on the link's target.
func TestSystemMounterRefusesSymlinkTarget(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	target := filepath.Join(base, "target")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mountinfoLine(t, target) != "" {
			_ = (&SystemMounter{}).Unmount(target)
		}
	})
	if err := (&SystemMounter{}).MountTmpfs(link, 1<<20); !errors.Is(err, ErrPathEscape) {
		t.Fatalf("MountTmpfs(symlink) = %v, want ErrPathEscape", err)
	}
	if line := mountinfoLine(t, target); line != "" {
		t.Fatalf("tmpfs mounted on the symlink's target: %s", line)
	}
}
