//go:build e2e

package volumemgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Root tests: run with `go test -tags e2e -count=1 -run 'Plugins|SubPath|Tmpfs' ./volumemgr/`.

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

// mountinfoLine returns the /proc/self/mountinfo line whose mount point is
// path, or "".
func mountinfoLine(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountinfo(f[4]) == path {
			return line
		}
	}
	return ""
}

func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	m, err := MountPointsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestTmpfsEmptyDirE2E(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	before := mountsUnder(t, base)
	plugins := DefaultPlugins(PluginsConfig{Mounter: &SystemMounter{}})
	vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
		Medium: v1.StorageMediumMemory, SizeLimit: plugPtr(resource.MustParse("8Mi")),
	}}}
	p, err := FindPlugin(plugins, vol)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "pods/uid/volumes", EscapePluginName(p.Name()), "mem")
	if err := p.SetUp(t.Context(), plugTestPod(), vol, dir); err != nil {
		t.Fatal(err)
	}
	line := mountinfoLine(t, dir)
	if !strings.Contains(line, " - tmpfs ") || !strings.Contains(line, "size=8192k") {
		t.Fatalf("mountinfo for %s: %q", dir, line)
	}
	if mounted, err := (&SystemMounter{}).IsMountPoint(dir); err != nil || !mounted {
		t.Fatalf("IsMountPoint %v %v", mounted, err)
	}
	if fileModeOf(t, dir) != 0o777 {
		t.Fatalf("tmpfs mode %v", fileModeOf(t, dir))
	}
	plugMust(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	// Idempotent: a second SetUp does not stack another tmpfs.
	plugMust(t, p.SetUp(t.Context(), plugTestPod(), vol, dir))
	if n := len(mountsUnder(t, dir)); n != 1 {
		t.Fatalf("%d mounts at %s after a second SetUp", n, dir)
	}
	plugMust(t, p.TearDown(t.Context(), dir))
	if line := mountinfoLine(t, dir); line != "" {
		t.Fatalf("still mounted: %q", line)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("dir left")
	}
	if after := mountsUnder(t, base); len(after) != len(before) {
		t.Fatalf("mounts leaked: %v", after)
	}
}

func TestPluginsSecretOnTmpfsE2E(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	objs := &pluginObjects{secrets: map[string]*v1.Secret{"ns/sec": {Data: map[string][]byte{"pw": []byte("x")}}}}
	plugins := DefaultPlugins(PluginsConfig{Mounter: &SystemMounter{}, Objects: objs}) // TmpfsAuto, root
	vol := &v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}}
	p, _ := FindPlugin(plugins, vol)
	dir := filepath.Join(base, "s")
	plugMust(t, p.SetUp(t.Context(), plugTestPod(), vol, dir))
	if line := mountinfoLine(t, dir); !strings.Contains(line, " - tmpfs ") {
		t.Fatalf("secret not on tmpfs: %q", line)
	}
	if readVisible(t, dir, "pw") != "x" {
		t.Fatal("content")
	}
	plugMust(t, p.TearDown(t.Context(), dir))
	if len(mountsUnder(t, base)) != 0 {
		t.Fatal("leaked")
	}
}

func statIno(t *testing.T, p string) (uint64, uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Dev, st.Ino
}

// A goroutine flips a symlink in the volume between an inside dir and
// outside dirs while PrepareSubPath runs again and again: every mount that
// succeeds must show the inside dir.
func TestSubPathSymlinkSwapE2E(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	vol := filepath.Join(base, "pods/uid/volumes/kubernetes.io~empty-dir/v")
	plugMust(t, os.MkdirAll(filepath.Join(vol, "inside"), 0o755))
	plugMust(t, os.WriteFile(filepath.Join(vol, "inside/marker"), []byte("inside"), 0o644))
	out := outsideDir(t)
	plugMust(t, os.WriteFile(filepath.Join(out, "marker"), []byte("outside"), 0o644))
	inDev, inIno := statIno(t, filepath.Join(vol, "inside"))
	before := mountsUnder(t, "/")

	plugMust(t, os.Symlink("inside", filepath.Join(vol, "link")))
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var flips atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []string{"inside", "/etc", out, "../../../../../../etc"}
		tmp := filepath.Join(vol, "link.tmp")
		for i := 0; ctx.Err() == nil; i++ {
			_ = os.Remove(tmp)
			if err := os.Symlink(targets[i%len(targets)], tmp); err != nil {
				continue
			}
			if os.Rename(tmp, filepath.Join(vol, "link")) == nil {
				flips.Add(1)
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	podDir := filepath.Join(base, "pods/uid")
	var mountedOK, refused int
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if i >= 1000 && mountedOK >= 50 && refused >= 50 && flips.Load() >= 1000 {
			break
		}
		sub := "link"
		if i%2 == 1 {
			sub = "link/marker"
		}
		target, err := SubPathTarget(podDir, "v", "c", i%3)
		if err != nil {
			t.Fatal(err)
		}
		hostPath, cleanup, err := PrepareSubPath(vol, sub, target)
		if err != nil {
			if !errors.Is(err, ErrPathEscape) && !errors.Is(err, unix.ENOENT) {
				t.Fatalf("iteration %d: unexpected error %v", i, err)
			}
			refused++
			continue
		}
		mountedOK++
		if sub == "link" {
			dev, ino := statIno(t, hostPath)
			if dev != inDev || ino != inIno {
				_ = cleanup()
				t.Fatalf("iteration %d: subPath mount is not the inside dir (dev %d ino %d)", i, dev, ino)
			}
		} else {
			b, err := os.ReadFile(hostPath)
			if err != nil || string(b) != "inside" {
				_ = cleanup()
				t.Fatalf("iteration %d: subPath file reads %q %v", i, b, err)
			}
		}
		if err := cleanup(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("mounted %d, refused %d, symlink flips %d", mountedOK, refused, flips.Load())
	if mountedOK == 0 || refused == 0 {
		t.Fatalf("the race was not exercised: mounted %d, refused %d", mountedOK, refused)
	}
	plugMust(t, CleanupSubPaths(podDir))
	if after := mountsUnder(t, "/"); len(after) != len(before) {
		t.Fatalf("mounts leaked: %d before, %d after", len(before), len(after))
	}
	if _, err := os.Lstat(filepath.Join(podDir, "volume-subpaths")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("volume-subpaths left")
	}
}

func TestSubPathPrepareIdempotentAndCleanupE2E(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	vol := filepath.Join(base, "pods/uid/volumes/kubernetes.io~empty-dir/v")
	plugMust(t, os.MkdirAll(filepath.Join(vol, "d"), 0o755))
	plugMust(t, os.WriteFile(filepath.Join(vol, "f"), []byte("file"), 0o644))
	podDir := filepath.Join(base, "pods/uid")
	t1, _ := SubPathTarget(podDir, "v", "c", 0)
	t2, _ := SubPathTarget(podDir, "v", "c", 1)
	for i := 0; i < 2; i++ {
		if _, _, err := PrepareSubPath(vol, "d", t1); err != nil {
			t.Fatal(err)
		}
		if _, _, err := PrepareSubPath(vol, "f", t2); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(mountsUnder(t, podDir)); n != 2 {
		t.Fatalf("%d mounts, want 2 (no stacking)", n)
	}
	if b, _ := os.ReadFile(t2); string(b) != "file" {
		t.Fatalf("file subPath reads %q", b)
	}
	// Writes through the dir mount land in the volume.
	plugMust(t, os.WriteFile(filepath.Join(t1, "new"), []byte("n"), 0o644))
	if b, _ := os.ReadFile(filepath.Join(vol, "d/new")); string(b) != "n" {
		t.Fatal("bind mount is not the volume's dir")
	}
	// After a "restart": clean everything under the pod dir.
	plugMust(t, CleanupSubPaths(podDir))
	if n := len(mountsUnder(t, podDir)); n != 0 {
		t.Fatalf("%d mounts left", n)
	}
	if b, _ := os.ReadFile(filepath.Join(vol, "d/new")); string(b) != "n" {
		t.Fatal("cleanup removed volume content")
	}
}
