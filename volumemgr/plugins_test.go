package volumemgr

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pluginFakeMounter records tmpfs mounts in memory.
type pluginFakeMounter struct {
	mu      sync.Mutex
	mounts  map[string]int64 // target -> size
	history []string
}

func newPluginFakeMounter() *pluginFakeMounter {
	return &pluginFakeMounter{mounts: map[string]int64{}}
}

func (m *pluginFakeMounter) MountTmpfs(target string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := os.Stat(target); err != nil {
		return err
	}
	m.mounts[target] = size
	m.history = append(m.history, fmt.Sprintf("mount %s %d", target, size))
	return nil
}

func (m *pluginFakeMounter) Unmount(target string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.mounts[target]; !ok {
		return fmt.Errorf("%s not mounted", target)
	}
	delete(m.mounts, target)
	m.history = append(m.history, "unmount "+target)
	return nil
}

func (m *pluginFakeMounter) IsMountPoint(p string) (bool, error) {
	if _, err := os.Lstat(p); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.mounts[p]
	return ok, nil
}

// pluginObjects is an ObjectSource over maps.
type pluginObjects struct {
	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
}

func (o *pluginObjects) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cm, ok := o.configMaps[ns+"/"+name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, fmt.Errorf("configmap %s/%s: %w", ns, name, ErrObjectNotFound)
}

func (o *pluginObjects) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.secrets[ns+"/"+name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, fmt.Errorf("secret %s/%s: %w", ns, name, ErrObjectNotFound)
}

type pluginTokens struct{ calls []string }

func (t *pluginTokens) ServiceAccountToken(_ context.Context, pod *v1.Pod, aud string, exp int64) (string, error) {
	t.calls = append(t.calls, fmt.Sprintf("%s/%s %s %d", pod.Namespace, pod.Name, aud, exp))
	return "token-for-" + aud, nil
}

func plugPtr[T any](v T) *T { return &v }

func plugTestPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: types.UID("uid-1"),
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "say \"hi\""},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{
			Name: "c",
			Resources: v1.ResourceRequirements{
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("500m")},
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			},
		}}},
	}
}

type pluginEnv struct {
	plugins []Plugin
	objects *pluginObjects
	mounter *pluginFakeMounter
	tokens  *pluginTokens
	base    string
}

func newPluginEnv(t *testing.T, policy TmpfsPolicy) *pluginEnv {
	t.Helper()
	e := &pluginEnv{
		objects: &pluginObjects{configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}},
		mounter: newPluginFakeMounter(),
		tokens:  &pluginTokens{},
		base:    t.TempDir(),
	}
	e.plugins = DefaultPlugins(PluginsConfig{
		Objects: e.objects, Tokens: e.tokens, Mounter: e.mounter, SecretTmpfs: policy,
		NodeAllocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourceCPU: resource.MustParse("2")}
		},
	})
	return e
}

func (e *pluginEnv) dir(p Plugin, vol string) string {
	return filepath.Join(e.base, "pods/uid-1/volumes", EscapePluginName(p.Name()), vol)
}

func (e *pluginEnv) setUp(t *testing.T, pod *v1.Pod, vol *v1.Volume) (Plugin, string, error) {
	t.Helper()
	p, err := FindPlugin(e.plugins, vol)
	if err != nil {
		t.Fatal(err)
	}
	dir := e.dir(p, vol.Name)
	return p, dir, p.SetUp(t.Context(), pod, vol, dir)
}

func fileModeOf(t *testing.T, p string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestPluginNamesAndFind(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	want := map[string]bool{PluginNameEmptyDir: false, PluginNameHostPath: false, PluginNameConfigMap: true,
		PluginNameSecret: true, PluginNameProjected: true, PluginNameDownwardAPI: true}
	if len(e.plugins) != len(want) {
		t.Fatalf("%d plugins", len(e.plugins))
	}
	for _, p := range e.plugins {
		remount, ok := want[p.Name()]
		if !ok || p.RequiresRemount() != remount {
			t.Errorf("plugin %q remount=%v", p.Name(), p.RequiresRemount())
		}
		if PluginByName(e.plugins, p.Name()) != p {
			t.Errorf("PluginByName(%q)", p.Name())
		}
	}
	if got := EscapePluginName(PluginNameEmptyDir); got != "kubernetes.io~empty-dir" || UnescapePluginName(got) != PluginNameEmptyDir {
		t.Fatal(got)
	}
	if _, err := FindPlugin(e.plugins, &v1.Volume{Name: "n", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{}}}); !errors.Is(err, ErrNoPlugin) {
		t.Fatal(err)
	}
	both := &v1.Volume{Name: "n", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}, HostPath: &v1.HostPathVolumeSource{}}}
	if _, err := FindPlugin(e.plugins, both); !errors.Is(err, ErrMultiplePlugins) {
		t.Fatal(err)
	}
}

func TestPluginsEmptyDirDisk(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	vol := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	p, dir, err := e.setUp(t, plugTestPod(), vol)
	if err != nil {
		t.Fatal(err)
	}
	if m := fileModeOf(t, dir); m != 0o777 {
		t.Fatalf("mode %v", m)
	}
	plugMust(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	plugMust(t, p.SetUp(t.Context(), plugTestPod(), vol, dir)) // idempotent, content kept
	if readVisible(t, dir, "f") != "x" {
		t.Fatal("content lost on second SetUp")
	}
	if hp, _ := p.HostPath(plugTestPod(), vol, dir); hp != dir {
		t.Fatal(hp)
	}
	plugMust(t, p.TearDown(t.Context(), dir))
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("dir left after TearDown")
	}
	plugMust(t, p.TearDown(t.Context(), dir)) // idempotent
	if len(e.mounter.history) != 0 {
		t.Fatalf("disk emptyDir mounted: %v", e.mounter.history)
	}
}

func TestPluginsEmptyDirMemorySize(t *testing.T) {
	cases := []struct {
		name      string
		sizeLimit string
		pod       func(*v1.Pod)
		want      int64
	}{
		{"pod limit below node", "", nil, 64 << 20},
		{"sizeLimit below pod limit", "16Mi", nil, 16 << 20},
		{"sizeLimit above pod limit", "128Mi", nil, 64 << 20},
		{"a container without limit: node allocatable", "", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "nolimit"})
		}, 1 << 30},
		{"init container larger than the sum", "", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}}}}
		}, 100 << 20},
		{"sidecar adds up", "", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: plugPtr(v1.ContainerRestartPolicyAlways), Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Mi")}}}}
		}, 72 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newPluginEnv(t, TmpfsNever)
			src := &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}
			if c.sizeLimit != "" {
				src.SizeLimit = plugPtr(resource.MustParse(c.sizeLimit))
			}
			pod := plugTestPod()
			if c.pod != nil {
				c.pod(pod)
			}
			vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: src}}
			p, dir, err := e.setUp(t, pod, vol)
			if err != nil {
				t.Fatal(err)
			}
			if got := e.mounter.mounts[dir]; got != c.want {
				t.Fatalf("tmpfs size %d, want %d", got, c.want)
			}
			plugMust(t, p.SetUp(t.Context(), pod, vol, dir))
			if len(e.mounter.history) != 1 {
				t.Fatalf("second SetUp mounted again: %v", e.mounter.history)
			}
			plugMust(t, p.TearDown(t.Context(), dir))
			if len(e.mounter.mounts) != 0 {
				t.Fatal("still mounted")
			}
			if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatal("dir left")
			}
		})
	}
}

func TestPluginsEmptyDirErrors(t *testing.T) {
	noMounter := DefaultPlugins(PluginsConfig{})
	vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
	dir := filepath.Join(t.TempDir(), "mem")
	if err := noMounter[0].SetUp(t.Context(), plugTestPod(), vol, dir); !errors.Is(err, ErrNoMounter) || !strings.Contains(err.Error(), `"mem"`) {
		t.Fatalf("no mounter: %v", err)
	}
	huge := &v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}}
	if err := noMounter[0].SetUp(t.Context(), plugTestPod(), huge, dir); !errors.Is(err, ErrUnsupportedVolume) {
		t.Fatalf("hugepages: %v", err)
	}
	badName := &v1.Volume{Name: "../x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	if err := noMounter[0].SetUp(t.Context(), plugTestPod(), badName, dir); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("bad name: %v", err)
	}
	if err := noMounter[0].SetUp(t.Context(), plugTestPod(), &v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, "relative/dir"); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("relative dir: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a rejected SetUp created the dir")
	}
}

func TestPluginsHostPathTypes(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	root := t.TempDir()
	file := filepath.Join(root, "file")
	plugMust(t, os.WriteFile(file, nil, 0o600))
	sock := filepath.Join(root, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	missing := filepath.Join(root, "missing")

	hp := func(path string, typ v1.HostPathType) *v1.Volume {
		return &v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}}
	}
	ok := []*v1.Volume{
		hp(root, v1.HostPathDirectory), hp(root, v1.HostPathDirectoryOrCreate), hp(file, v1.HostPathFile),
		hp(file, v1.HostPathFileOrCreate), hp(sock, v1.HostPathSocket), hp("/dev/null", v1.HostPathCharDev),
		hp(missing, v1.HostPathUnset), hp(file, v1.HostPathUnset),
		{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: missing}}},
	}
	for _, vol := range ok {
		if _, _, err := e.setUp(t, plugTestPod(), vol); err != nil {
			t.Errorf("%s %v: %v", vol.HostPath.Path, vol.HostPath.Type, err)
		}
	}
	bad := []*v1.Volume{
		hp(file, v1.HostPathDirectory), hp(file, v1.HostPathDirectoryOrCreate), hp(root, v1.HostPathFile),
		hp(root, v1.HostPathFileOrCreate), hp(missing, v1.HostPathDirectory), hp(missing, v1.HostPathFile),
		hp(file, v1.HostPathSocket), hp(missing, v1.HostPathSocket), hp(file, v1.HostPathCharDev),
		hp("/dev/null", v1.HostPathBlockDev), hp(root, v1.HostPathBlockDev), hp(root, "Weird"),
	}
	for _, vol := range bad {
		_, _, err := e.setUp(t, plugTestPod(), vol)
		if !errors.Is(err, ErrHostPathType) || !strings.Contains(err.Error(), `volume "h"`) || !strings.Contains(err.Error(), vol.HostPath.Path) {
			t.Errorf("%s %v: %v", vol.HostPath.Path, *vol.HostPath.Type, err)
		}
	}
	for _, path := range []string{"rel/path", "/a/../etc", "/a\x00b", ""} {
		if _, _, err := e.setUp(t, plugTestPod(), hp(path, v1.HostPathUnset)); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q: %v", path, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a check created the missing path")
	}

	// The creating types.
	newDir := filepath.Join(root, "a/b/c")
	if _, _, err := e.setUp(t, plugTestPod(), hp(newDir, v1.HostPathDirectoryOrCreate)); err != nil {
		t.Fatal(err)
	}
	if m := fileModeOf(t, newDir); m&^0o022 != 0o755&^0o022 {
		t.Fatalf("created dir mode %v", m)
	}
	newFile := filepath.Join(root, "x/y/f")
	p, dir, err := e.setUp(t, plugTestPod(), hp(newFile, v1.HostPathFileOrCreate))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(newFile); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&^0o022 != 0o644&^0o022 {
		t.Fatalf("created file %v %v", fi, err)
	}
	if got, _ := p.HostPath(plugTestPod(), hp(newFile, v1.HostPathFileOrCreate), dir); got != newFile {
		t.Fatal(got)
	}
	plugMust(t, p.TearDown(t.Context(), dir))
	if _, err := os.Stat(newFile); err != nil {
		t.Fatal("TearDown touched the host path")
	}
}

func configMapVol(name, cm string, items []v1.KeyToPath, optional *bool, mode *int32) *v1.Volume {
	return &v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: cm}, Items: items, Optional: optional, DefaultMode: mode,
	}}}
}

func TestPluginsConfigMapFilesModesAndUpdate(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{
		Data:       map[string]string{"a.conf": "A", "b.conf": "B"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2}},
	}
	pod := plugTestPod()
	vol := configMapVol("cfg", "cfg", nil, nil, nil)
	p, dir, err := e.setUp(t, pod, vol)
	if err != nil {
		t.Fatal(err)
	}
	if readVisible(t, dir, "a.conf") != "A" || readVisible(t, dir, "bin") != "\x00\x01\x02" {
		t.Fatal("content")
	}
	if m := fileModeOf(t, filepath.Join(dir, "a.conf")); m != 0o644 {
		t.Fatalf("default mode %v", m)
	}
	if m := fileModeOf(t, dir); m != 0o777 {
		t.Fatalf("volume dir mode %v", m)
	}
	if len(e.mounter.history) != 0 {
		t.Fatal("configMap mounted a tmpfs")
	}

	// Unchanged: a remount writes nothing.
	before := treeSnapshot(t, dir)
	plugMust(t, p.SetUp(t.Context(), pod, vol, dir))
	sameSnapshot(t, "configMap volume on an unchanged remount", before, treeSnapshot(t, dir))

	// Updated object: new content appears, removed key goes, one payload dir.
	oldTs := tsDirs(t, dir)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a.conf": "A2"}}
	plugMust(t, p.SetUp(t.Context(), pod, vol, dir))
	if readVisible(t, dir, "a.conf") != "A2" {
		t.Fatal("update not visible")
	}
	if _, err := os.Lstat(filepath.Join(dir, "b.conf")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("removed key still there")
	}
	if now := tsDirs(t, dir); len(now) != 1 || now[0] == oldTs[0] {
		t.Fatalf("payload dirs %v (old %v)", now, oldTs)
	}

	plugMust(t, p.TearDown(t.Context(), dir))
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("dir left")
	}
}

func TestPluginsConfigMapItemsAndModes(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "A", "b": "B", "c": "C"}}
	vol := configMapVol("cfg", "cfg", []v1.KeyToPath{
		{Key: "a", Path: "dir/a.txt"},
		{Key: "b", Path: "b.txt", Mode: plugPtr(int32(0o600))},
	}, nil, plugPtr(int32(0o440)))
	_, dir, err := e.setUp(t, plugTestPod(), vol)
	if err != nil {
		t.Fatal(err)
	}
	if readVisible(t, dir, "dir/a.txt") != "A" || readVisible(t, dir, "b.txt") != "B" {
		t.Fatal("content")
	}
	if _, err := os.Lstat(filepath.Join(dir, "c")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("unlisted key projected")
	}
	if m := fileModeOf(t, filepath.Join(dir, "dir/a.txt")); m != 0o440 {
		t.Fatalf("defaultMode: %v", m)
	}
	if m := fileModeOf(t, filepath.Join(dir, "b.txt")); m != 0o600 {
		t.Fatalf("item mode: %v", m)
	}
	if link, _ := os.Readlink(filepath.Join(dir, "dir")); link != "..data/dir" {
		t.Fatalf("nested top-level link %q", link)
	}
}

// The kubelet's TestPluginOptional and friends: a missing object or key is
// an error unless optional.
func TestPluginsConfigMapAndSecretOptional(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "A"}}
	e.objects.secrets["ns/sec"] = &v1.Secret{Data: map[string][]byte{"a": []byte("A")}}
	secretVol := func(name string, items []v1.KeyToPath, optional *bool) *v1.Volume {
		return &v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: name, Items: items, Optional: optional}}}
	}
	missingKey := []v1.KeyToPath{{Key: "nope", Path: "nope"}, {Key: "a", Path: "a"}}
	cases := []struct {
		name string
		vol  *v1.Volume
		want error
	}{
		{"configMap missing", configMapVol("v", "absent", nil, nil, nil), ErrObjectNotFound},
		{"configMap missing optional", configMapVol("v", "absent", nil, plugPtr(true), nil), nil},
		{"configMap missing key", configMapVol("v", "cfg", missingKey, plugPtr(false), nil), ErrKeyNotFound},
		{"configMap missing key optional", configMapVol("v", "cfg", missingKey, plugPtr(true), nil), nil},
		{"secret missing", secretVol("absent", nil, nil), ErrObjectNotFound},
		{"secret missing optional", secretVol("absent", nil, plugPtr(true)), nil},
		{"secret missing key", secretVol("sec", missingKey, nil), ErrKeyNotFound},
		{"secret missing key optional", secretVol("sec", missingKey, plugPtr(true)), nil},
		{"configMap bad item path", configMapVol("v", "cfg", []v1.KeyToPath{{Key: "a", Path: "../../etc/x"}}, nil, nil), ErrUnsafePath},
		{"configMap ..data item", configMapVol("v", "cfg", []v1.KeyToPath{{Key: "a", Path: "..data"}}, nil, nil), ErrUnsafePath},
		{"configMap bad name", configMapVol("v", "../x", nil, nil, nil), ErrUnsafePath},
		{"configMap bad mode", configMapVol("v", "cfg", nil, nil, plugPtr(int32(0o4777))), ErrUnsupportedVolume},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, dir, err := e.setUp(t, plugTestPod(), c.vol)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				// An optional miss still makes the volume (empty or partial).
				if _, err := os.Stat(filepath.Join(dir, dataDirName)); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("missing key projected")
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `"v"`) && !strings.Contains(err.Error(), `"s"`) {
				t.Fatalf("err %v, want %v naming the volume", err, c.want)
			}
		})
	}
	// Configured without an ObjectSource.
	bare := DefaultPlugins(PluginsConfig{SecretTmpfs: TmpfsNever})
	dir := filepath.Join(t.TempDir(), "v")
	if err := bare[2].SetUp(t.Context(), plugTestPod(), configMapVol("v", "cfg", nil, nil, nil), dir); !errors.Is(err, ErrNoObjectSource) {
		t.Fatal(err)
	}
	plugMust(t, bare[2].SetUp(t.Context(), plugTestPod(), configMapVol("v", "cfg", nil, plugPtr(true), nil), dir))
}

func TestPluginsSecretTmpfsPolicy(t *testing.T) {
	for _, c := range []struct {
		policy TmpfsPolicy
		tmpfs  bool
	}{{TmpfsAlways, true}, {TmpfsNever, false}, {TmpfsAuto, false}} { // Auto with a fake mounter: disk
		e := newPluginEnv(t, c.policy)
		e.objects.secrets["ns/sec"] = &v1.Secret{Data: map[string][]byte{"password": []byte("hunter2")}}
		vol := &v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec", DefaultMode: plugPtr(int32(0o400))}}}
		p, dir, err := e.setUp(t, plugTestPod(), vol)
		if err != nil {
			t.Fatal(err)
		}
		if _, mounted := e.mounter.mounts[dir]; mounted != c.tmpfs {
			t.Fatalf("policy %v: tmpfs %v", c.policy, mounted)
		}
		if c.tmpfs && e.mounter.mounts[dir] != 64<<20 {
			t.Fatalf("secret tmpfs size %d", e.mounter.mounts[dir])
		}
		if readVisible(t, dir, "password") != "hunter2" || fileModeOf(t, filepath.Join(dir, "password")) != 0o400 {
			t.Fatal("secret file")
		}
		plugMust(t, p.TearDown(t.Context(), dir))
		if len(e.mounter.mounts) != 0 {
			t.Fatal("left mounted")
		}
	}
	// TmpfsAlways without a mounter fails.
	ps := DefaultPlugins(PluginsConfig{SecretTmpfs: TmpfsAlways, Objects: &pluginObjects{secrets: map[string]*v1.Secret{"ns/sec": {}}}})
	vol := &v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}}
	if err := ps[3].SetUp(t.Context(), plugTestPod(), vol, filepath.Join(t.TempDir(), "s")); !errors.Is(err, ErrNoMounter) {
		t.Fatal(err)
	}
}

// A failed first SetUp on a tmpfs it mounted unmounts again.
func TestPluginsSecretFailedSetUpUnmounts(t *testing.T) {
	e := newPluginEnv(t, TmpfsAlways)
	e.objects.secrets["ns/sec"] = &v1.Secret{Data: map[string][]byte{"..bad": []byte("x")}}
	vol := &v1.Volume{Name: "s", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "sec"}}}
	if _, _, err := e.setUp(t, plugTestPod(), vol); !errors.Is(err, ErrUnsafePath) {
		t.Fatal(err)
	}
	if len(e.mounter.mounts) != 0 {
		t.Fatalf("left mounted: %v", e.mounter.history)
	}
}

func TestPluginsDownwardAPI(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	pod := plugTestPod()
	item := func(path, field string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: field}}
	}
	res := func(path, r, div string) v1.DownwardAPIVolumeFile {
		f := v1.DownwardAPIVolumeFile{Path: path, ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "c", Resource: r}}
		if div != "" {
			f.ResourceFieldRef.Divisor = resource.MustParse(div)
		}
		return f
	}
	items := []v1.DownwardAPIVolumeFile{
		item("name", "metadata.name"), item("ns", "metadata.namespace"), item("uid", "metadata.uid"),
		item("labels", "metadata.labels"), item("annotations", "metadata.annotations"),
		item("app", "metadata.labels['app']"),
		res("cpu_limit", "limits.cpu", "1m"), res("cpu_limit_cores", "limits.cpu", ""),
		res("mem_limit", "limits.memory", "1Mi"), res("cpu_request", "requests.cpu", "1m"),
		res("eph_limit", "limits.ephemeral-storage", "1Gi"),
	}
	items[0].Mode = plugPtr(int32(0o600))
	vol := &v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}}
	p, dir, err := e.setUp(t, pod, vol)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"name": "web", "ns": "ns", "uid": "uid-1", "labels": "app=\"web\"\ntier=\"front\"",
		"annotations": `note="say \"hi\""`, "app": "web", "cpu_limit": "500", "cpu_limit_cores": "1",
		"mem_limit": "64", "cpu_request": "250", "eph_limit": "0",
	}
	for f, w := range want {
		if got := readVisible(t, dir, f); got != w {
			t.Errorf("%s = %q, want %q", f, got, w)
		}
	}
	if fileModeOf(t, filepath.Join(dir, "name")) != 0o600 || fileModeOf(t, filepath.Join(dir, "ns")) != 0o644 {
		t.Fatal("modes")
	}
	// Labels change: re-projected on remount.
	pod.Labels["app"] = "api"
	plugMust(t, p.SetUp(t.Context(), pod, vol, dir))
	if readVisible(t, dir, "app") != "api" {
		t.Fatal("label update not re-projected")
	}
	for _, bad := range []v1.DownwardAPIVolumeFile{
		item("x", "spec.nodeName"), res("x", "limits.gpu", ""),
		{Path: "x", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}},
		item("../x", "metadata.name"),
	} {
		vol := &v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{bad}}}}
		if err := p.SetUp(t.Context(), pod, vol, dir); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestPluginsProjected(t *testing.T) {
	e := newPluginEnv(t, TmpfsAlways)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"ca.crt": "CA"}}
	e.objects.secrets["ns/sec"] = &v1.Secret{Data: map[string][]byte{"key": []byte("K")}}
	vol := &v1.Volume{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: plugPtr(int32(0o444)),
		Sources: []v1.VolumeProjection{
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}, Items: []v1.KeyToPath{{Key: "key", Path: "tls/key", Mode: plugPtr(int32(0o400))}}}},
			{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "absent"}, Optional: plugPtr(true)}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", Audience: "api"}},
		},
	}}}
	p, dir, err := e.setUp(t, plugTestPod(), vol)
	if err != nil {
		t.Fatal(err)
	}
	for f, w := range map[string]string{"ca.crt": "CA", "tls/key": "K", "namespace": "ns", "token": "token-for-api"} {
		if got := readVisible(t, dir, f); got != w {
			t.Errorf("%s = %q", f, got)
		}
	}
	if fileModeOf(t, filepath.Join(dir, "ca.crt")) != 0o444 || fileModeOf(t, filepath.Join(dir, "tls/key")) != 0o400 {
		t.Fatal("modes")
	}
	if len(e.tokens.calls) != 1 || e.tokens.calls[0] != "ns/web api 3600" {
		t.Fatalf("token calls %v", e.tokens.calls)
	}
	if _, ok := e.mounter.mounts[dir]; !ok {
		t.Fatal("projected not on tmpfs")
	}
	plugMust(t, p.TearDown(t.Context(), dir))

	// No token source: an error naming the path.
	noTok := DefaultPlugins(PluginsConfig{Objects: e.objects, SecretTmpfs: TmpfsNever})
	if err := noTok[4].SetUp(t.Context(), plugTestPod(), vol, filepath.Join(t.TempDir(), "p")); !errors.Is(err, ErrNoTokenSource) {
		t.Fatal(err)
	}
	// Required source missing.
	vol.Projected.Sources[2].Secret.Optional = nil
	if err := p.SetUp(t.Context(), plugTestPod(), vol, dir); !errors.Is(err, ErrObjectNotFound) {
		t.Fatal(err)
	}
}

func TestPluginsFsGroup(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	e.objects.configMaps["ns/cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "A"}}
	pod := plugTestPod()
	gid := int64(os.Getgid())
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	_, dir, err := e.setUp(t, pod, configMapVol("cfg", "cfg", nil, nil, plugPtr(int32(0o400))))
	if err != nil {
		t.Fatal(err)
	}
	if m := fileModeOf(t, filepath.Join(dir, "a")); m != 0o440 {
		t.Fatalf("fsGroup mode %v", m)
	}
}

// A negative sizeLimit on a memory emptyDir is an error, not "no limit"
// (issue 23, item 8); nothing is mounted.
func TestPluginsEmptyDirNegativeSizeLimit(t *testing.T) {
	e := newPluginEnv(t, TmpfsNever)
	vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{
		Medium: v1.StorageMediumMemory, SizeLimit: plugPtr(resource.MustParse("-1")),
	}}}
	if _, _, err := e.setUp(t, plugTestPod(), vol); err == nil || !strings.Contains(err.Error(), "sizeLimit") {
		t.Fatalf("SetUp = %v, want an error naming sizeLimit", err)
	}
	if len(e.mounter.mounts) != 0 {
		t.Fatalf("mounted %v", e.mounter.mounts)
	}
}

// A volume dir pre-seeded as a symlink (issue 23, item 4) is refused before
// anything is mounted, and TearDown removes the link without unmounting or
// touching its target.
func TestPluginsSymlinkedVolumeDirRefused(t *testing.T) {
	for _, seed := range []string{"vol", "plugin"} {
		t.Run(seed, func(t *testing.T) {
			e := newPluginEnv(t, TmpfsNever)
			vol := &v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}
			p, err := FindPlugin(e.plugins, vol)
			plugMust(t, err)
			dir := e.dir(p, vol.Name)
			target := t.TempDir()
			link := dir
			if seed == "plugin" {
				link = filepath.Dir(dir)
			}
			plugMust(t, os.MkdirAll(filepath.Dir(link), 0o750))
			plugMust(t, os.Symlink(target, link))
			if err := p.SetUp(t.Context(), plugTestPod(), vol, dir); !errors.Is(err, ErrPathEscape) {
				t.Fatalf("SetUp through a symlink = %v, want ErrPathEscape", err)
			}
			if len(e.mounter.mounts) != 0 || len(e.mounter.history) != 0 {
				t.Fatalf("mounted through a symlink: %v", e.mounter.history)
			}
			if seed == "vol" {
				plugMust(t, p.TearDown(t.Context(), dir))
				if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
					t.Fatal("link left")
				}
				if _, err := os.Stat(target); err != nil {
					t.Fatal("target removed")
				}
			}
		})
	}
}
