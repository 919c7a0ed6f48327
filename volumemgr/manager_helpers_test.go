package volumemgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// stubPlugin serves one kind of volume from a plain dir and counts calls.
type stubPlugin struct {
	name    string
	remount bool
	match   func(*v1.Volume) bool

	mu        sync.Mutex
	setUps    map[string]int // by dir
	tearDowns map[string]int
	failSetUp error
	failTear  error
}

func newStub(name string, remount bool, match func(*v1.Volume) bool) *stubPlugin {
	return &stubPlugin{name: name, remount: remount, match: match, setUps: map[string]int{}, tearDowns: map[string]int{}}
}

func (s *stubPlugin) Name() string                   { return s.name }
func (s *stubPlugin) CanSupport(vol *v1.Volume) bool { return vol != nil && s.match(vol) }
func (s *stubPlugin) RequiresRemount() bool          { return s.remount }

func (s *stubPlugin) SetUp(_ context.Context, _ *v1.Pod, _ *v1.Volume, dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setUps[dir]++
	if s.failSetUp != nil {
		return s.failSetUp
	}
	return os.MkdirAll(dir, 0o750)
}

func (s *stubPlugin) TearDown(_ context.Context, dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tearDowns[dir]++
	if s.failTear != nil {
		return s.failTear
	}
	return os.RemoveAll(dir)
}

func (s *stubPlugin) HostPath(_ *v1.Pod, _ *v1.Volume, dir string) (string, error) { return dir, nil }

func (s *stubPlugin) setUpCount(dir string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.setUps[dir]
}

func (s *stubPlugin) tearDownCount(dir string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tearDowns[dir]
}

func (s *stubPlugin) setFail(setUp, tear error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failSetUp, s.failTear = setUp, tear
}

// Stub plugin names: the real ones, so that dirs and read-only rules match.
func stubEmptyDir() *stubPlugin {
	return newStub(PluginNameEmptyDir, false, func(v *v1.Volume) bool { return v.EmptyDir != nil })
}

func stubConfigMap() *stubPlugin {
	return newStub(PluginNameConfigMap, true, func(v *v1.Volume) bool { return v.ConfigMap != nil })
}

func stubHostPath() *stubPlugin {
	p := newStub(PluginNameHostPath, false, func(v *v1.Volume) bool { return v.HostPath != nil })
	return p
}

// fakePods is a PodLister and PodStateProvider.
type fakePods struct {
	mu          sync.Mutex
	pods        []*v1.Pod
	terminating map[types.UID]bool
	removed     map[types.UID]bool
	ready       bool
}

func newFakePods(pods ...*v1.Pod) *fakePods {
	return &fakePods{pods: pods, terminating: map[types.UID]bool{}, removed: map[types.UID]bool{}, ready: true}
}

func (f *fakePods) Pods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.pods...)
}

func (f *fakePods) set(pods ...*v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

func (f *fakePods) ShouldPodContainersBeTerminating(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terminating[uid] || f.removed[uid]
}

func (f *fakePods) ShouldPodRuntimeBeRemoved(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removed[uid]
}

func (f *fakePods) setRemoved(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed[uid] = true
}

func (f *fakePods) setTerminating(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.terminating[uid] = true
}

func (f *fakePods) sourcesReady() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakePods) setReady(r bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ready = r
}

type testEnv struct {
	m       *Manager
	clock   *clocktesting.FakeClock
	pods    *fakePods
	empty   *stubPlugin
	cm      *stubPlugin
	host    *stubPlugin
	podsDir string
}

func newEnv(t testing.TB, pods ...*v1.Pod) *testEnv {
	t.Helper()
	e := &testEnv{
		clock:   clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		pods:    newFakePods(pods...),
		empty:   stubEmptyDir(),
		cm:      stubConfigMap(),
		host:    stubHostPath(),
		podsDir: filepath.Join(t.TempDir(), "pods"),
	}
	m, err := New(Config{
		PodsDir:      e.podsDir,
		Plugins:      []Plugin{e.empty, e.cm, e.host},
		Pods:         e.pods,
		PodState:     e.pods,
		SourcesReady: e.pods.sourcesReady,
		Clock:        e.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

// sync runs one populator and one reconciler pass.
func (e *testEnv) sync() {
	ctx := context.Background()
	e.m.PopulateOnce(ctx)
	e.m.ReconcileOnce(ctx)
}

func (e *testEnv) volDir(uid types.UID, plugin, name string) string {
	return filepath.Join(e.podsDir, string(uid), "volumes", EscapePluginName(plugin), name)
}

// testPod makes a pod with one container mounting each named volume; the
// volume's kind follows its name prefix: "cm" configMap, "host" hostPath,
// "rbd" RBD (no plugin), else emptyDir.
func testPod(name string, uid types.UID, vols ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c"}}},
	}
	for _, n := range vols {
		vol := v1.Volume{Name: n}
		switch {
		case len(n) >= 2 && n[:2] == "cm":
			vol.ConfigMap = &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: n}}
		case len(n) >= 4 && n[:4] == "host":
			vol.HostPath = &v1.HostPathVolumeSource{Path: "/srv/" + n}
		case len(n) >= 3 && n[:3] == "rbd":
			vol.RBD = &v1.RBDVolumeSource{}
		default:
			vol.EmptyDir = &v1.EmptyDirVolumeSource{}
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		pod.Spec.Containers[0].VolumeMounts = append(pod.Spec.Containers[0].VolumeMounts,
			v1.VolumeMount{Name: n, MountPath: "/mnt/" + n})
	}
	return pod
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// waitResult runs f in a goroutine and returns a channel with its error.
func waitResult(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}
