package volumemgr

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"no PodsDir", Config{}, "PodsDir"},
		{"relative PodsDir", Config{PodsDir: "pods"}, "PodsDir"},
		{"negative period", Config{PodsDir: "/p", ReconcilePeriod: -1}, "ReconcilePeriod"},
		{"negative wait", Config{PodsDir: "/p", WaitTimeout: -time.Second}, "WaitTimeout"},
		{"nil plugin", Config{PodsDir: "/p", Plugins: []Plugin{nil}}, "Plugins[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New = %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	m, err := New(Config{PodsDir: "/var/lib/nodekit/pods/"})
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.WaitTimeout != 2*time.Minute+3*time.Second || m.cfg.ReconcilePeriod != 100*time.Millisecond ||
		m.cfg.PopulatePeriod != 100*time.Millisecond {
		t.Errorf("defaults: %+v", m.cfg)
	}
	if len(m.Plugins()) != 6 {
		t.Errorf("default plugins: %d, want 6", len(m.Plugins()))
	}
	if err := m.Run(context.Background()); !errors.Is(err, ErrNoPodSource) {
		t.Errorf("Run without a pod source = %v, want ErrNoPodSource", err)
	}
}

// The kubelet's TestFindAndAddNewPods_WithDifferentConditions: before the
// first complete pass, pods whose runtime is gone are skipped; after it,
// terminating pods are.
func TestPopulatorConditions(t *testing.T) {
	for _, tc := range []struct {
		desc         string
		hasAddedPods bool
		state        string
		want         bool
	}{
		{"not added yet, runtime removed", false, "removed", false},
		{"not added yet, terminating", false, "terminating", true},
		{"not added yet, running", false, "", true},
		{"added, terminating", true, "terminating", false},
		{"added, runtime removed", true, "removed", false},
		{"added, running", true, "", true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pod := testPod("p", "uid1", "data")
			e := newEnv(t, pod)
			switch tc.state {
			case "removed":
				e.pods.setRemoved(pod.UID)
			case "terminating":
				e.pods.setTerminating(pod.UID)
			}
			e.m.pop.hasAddedPods = tc.hasAddedPods
			e.pods.setReady(false) // the pass must not change hasAddedPods
			e.m.PopulateOnce(context.Background())
			if got := e.m.dsw.hasPod(pod.UID); got != tc.want {
				t.Fatalf("pod in desired state = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPopulatorDesiredVolumes(t *testing.T) {
	pod := testPod("p", "uid1", "data", "cm1")
	// A volume no container mounts is not expected.
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "unused", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	// A device use counts.
	pod.Spec.InitContainers = []v1.Container{{Name: "init", VolumeDevices: []v1.VolumeDevice{{Name: "dev", DevicePath: "/dev/x"}}}}
	pod.Spec.Volumes = append(pod.Spec.Volumes, v1.Volume{Name: "dev", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	e := newEnv(t, pod)
	e.m.PopulateOnce(context.Background())
	names := e.m.dsw.volumeNames(pod.UID)
	want := map[string]struct{}{"data": {}, "cm1": {}, "dev": {}}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("desired volumes %v, want %v", names, want)
	}
	got := e.m.GetVolumesInUse()
	wantInUse := []string{
		"kubernetes.io/configmap/uid1-cm1",
		"kubernetes.io/empty-dir/uid1-data",
		"kubernetes.io/empty-dir/uid1-dev",
	}
	if !reflect.DeepEqual(got, wantInUse) {
		t.Fatalf("GetVolumesInUse = %v, want %v", got, wantInUse)
	}
}

func TestPopulatorRejectsUnsafeNamesAndUnknownPlugins(t *testing.T) {
	bad := testPod("bad", "../../etc", "data")
	badVol := testPod("badvol", "uid2", "data")
	badVol.Spec.Volumes[0].Name = ".."
	badVol.Spec.Containers[0].VolumeMounts[0].Name = ".."
	noPlugin := testPod("np", "uid3", "rbd1", "data")
	e := newEnv(t, bad, badVol, noPlugin)
	e.sync()
	if e.m.dsw.hasPod(bad.UID) || e.m.dsw.volumeExists(badVol.UID, "..") {
		t.Fatal("an unsafe UID or volume name reached the desired state")
	}
	if !e.m.dsw.volumeExists(noPlugin.UID, "data") || e.m.dsw.volumeExists(noPlugin.UID, "rbd1") {
		t.Fatalf("desired volumes of np: %v", e.m.dsw.volumeNames(noPlugin.UID))
	}
	for uid, want := range map[types.UID]error{bad.UID: ErrUnsafePath, badVol.UID: ErrUnsafePath, noPlugin.UID: ErrNoPlugin} {
		errs := e.m.dsw.popErrors(uid)
		if len(errs) != 1 || !strings.Contains(errs[0], strings.TrimPrefix(want.Error(), "volumemgr: ")) {
			t.Errorf("errors of %s: %q, want one mentioning %v", uid, errs, want)
		}
	}
	if exists(filepath.Join(filepath.Dir(e.podsDir), "etc")) {
		t.Fatal("something was created outside the pods dir")
	}
}

func TestPopulatorRemovesOnlyWhenRuntimeRemoved(t *testing.T) {
	pod := testPod("p", "uid1", "data")
	e := newEnv(t, pod)
	e.sync()
	if !e.m.dsw.hasPod(pod.UID) {
		t.Fatal("pod not added")
	}
	e.pods.set() // deleted from the pod list, containers may still run
	e.m.PopulateOnce(context.Background())
	if !e.m.dsw.hasPod(pod.UID) {
		t.Fatal("pod removed from the desired state while its runtime may still run")
	}
	e.pods.setRemoved(pod.UID)
	e.m.PopulateOnce(context.Background())
	if e.m.dsw.hasPod(pod.UID) {
		t.Fatal("pod kept in the desired state after its runtime was removed")
	}
}

func TestHasAddedPodsNeedsAPassWithSourcesReady(t *testing.T) {
	e := newEnv(t)
	e.pods.setReady(false)
	e.m.PopulateOnce(context.Background())
	if e.m.HasAddedPods() {
		t.Fatal("HasAddedPods before the sources were ready")
	}
	e.pods.setReady(true)
	e.m.PopulateOnce(context.Background())
	if !e.m.HasAddedPods() {
		t.Fatal("HasAddedPods false after a pass with the sources ready")
	}
}

func TestReconcilerMountsAndUnmounts(t *testing.T) {
	pod := testPod("p", "uid1", "data", "cm1")
	e := newEnv(t, pod)
	e.pods.setReady(false)
	e.sync()
	data, cm := e.volDir(pod.UID, PluginNameEmptyDir, "data"), e.volDir(pod.UID, PluginNameConfigMap, "cm1")
	if e.empty.setUpCount(data) != 1 || e.cm.setUpCount(cm) != 1 || !exists(data) || !exists(cm) {
		t.Fatalf("SetUp calls %d, %d", e.empty.setUpCount(data), e.cm.setUpCount(cm))
	}
	mounted := e.m.GetMountedVolumesForPod(pod.UID)
	if len(mounted) != 2 || mounted["data"].Dir != data || mounted["data"].HostPath != data ||
		mounted["cm1"].UniqueName != "kubernetes.io/configmap/uid1-cm1" || mounted["cm1"].Volume == nil {
		t.Fatalf("GetMountedVolumesForPod = %+v", mounted)
	}
	e.sync()
	if e.empty.setUpCount(data) != 1 || e.cm.setUpCount(cm) != 1 {
		t.Fatal("a mounted volume was set up again without a reprocess")
	}

	// Gone, but the populator has not completed a pass with the sources
	// ready: nothing is unmounted.
	e.pods.set()
	e.pods.setRemoved(pod.UID)
	e.sync()
	if e.empty.tearDownCount(data) != 0 || !exists(data) {
		t.Fatal("unmounted before the populator HasAddedPods")
	}
	e.pods.setReady(true)
	e.sync()
	if e.empty.tearDownCount(data) != 1 || e.cm.tearDownCount(cm) != 1 || exists(data) || exists(cm) {
		t.Fatal("volumes of a removed pod not torn down")
	}
	if len(e.m.GetMountedVolumesForPod(pod.UID)) != 0 || len(e.m.GetVolumesInUse()) != 0 {
		t.Fatal("state not empty after the tear down")
	}
}

func TestReconcilerRemountsOnReprocess(t *testing.T) {
	pod := testPod("p", "uid1", "data", "cm1")
	e := newEnv(t, pod)
	e.sync()
	e.m.ReprocessPod(pod.UID)
	e.sync()
	data, cm := e.volDir(pod.UID, PluginNameEmptyDir, "data"), e.volDir(pod.UID, PluginNameConfigMap, "cm1")
	if got := e.cm.setUpCount(cm); got != 2 {
		t.Errorf("configMap SetUp calls after a reprocess = %d, want 2", got)
	}
	if got := e.empty.setUpCount(data); got != 1 {
		t.Errorf("emptyDir SetUp calls after a reprocess = %d, want 1 (no remount)", got)
	}
	// A failing remount keeps the volume mounted and is not the pod's error.
	e.cm.setFail(errors.New("configmap gone"), nil)
	e.m.ReprocessPod(pod.UID)
	e.sync()
	if _, ok := e.m.GetMountedVolumesForPod(pod.UID)["cm1"]; !ok {
		t.Error("a failed remount unmounted the volume")
	}
	if errs := e.m.dsw.popErrors(pod.UID); len(errs) != 0 {
		t.Errorf("a failed remount recorded pod errors %q", errs)
	}
}

func TestReconcilerBacksOffFailedSetUp(t *testing.T) {
	pod := testPod("p", "uid1", "data")
	e := newEnv(t, pod)
	e.empty.setFail(errors.New("disk on fire"), nil)
	dir := e.volDir(pod.UID, PluginNameEmptyDir, "data")
	e.sync()
	e.sync()
	if got := e.empty.setUpCount(dir); got != 1 {
		t.Fatalf("SetUp calls within the back-off = %d, want 1", got)
	}
	errs := e.m.dsw.popErrors(pod.UID)
	if len(errs) != 1 || errs[0] != `MountVolume.SetUp failed for volume "data": disk on fire` {
		t.Fatalf("pod errors %q", errs)
	}
	e.clock.Step(initialRetryDelay)
	e.sync()
	if got := e.empty.setUpCount(dir); got != 2 {
		t.Fatalf("SetUp calls after the back-off = %d, want 2", got)
	}
	e.clock.Step(initialRetryDelay) // the delay doubled: not yet
	e.sync()
	if got := e.empty.setUpCount(dir); got != 2 {
		t.Fatalf("SetUp calls within the doubled back-off = %d, want 2", got)
	}
	e.empty.setFail(nil, nil)
	e.clock.Step(initialRetryDelay)
	e.sync()
	if _, ok := e.m.GetMountedVolumesForPod(pod.UID)["data"]; !ok {
		t.Fatal("not mounted after the failure cleared")
	}
}

func TestReconcilerRetriesFailedTearDown(t *testing.T) {
	pod := testPod("p", "uid1", "data")
	e := newEnv(t, pod)
	e.sync()
	e.empty.setFail(nil, errors.New("busy"))
	e.pods.set()
	e.pods.setRemoved(pod.UID)
	e.sync()
	dir := e.volDir(pod.UID, PluginNameEmptyDir, "data")
	if !e.m.asw.podHasVolumes(pod.UID) {
		t.Fatal("a volume whose tear down failed left the actual state")
	}
	e.empty.setFail(nil, nil)
	e.clock.Step(initialRetryDelay)
	e.sync()
	if e.m.asw.podHasVolumes(pod.UID) || exists(dir) || e.empty.tearDownCount(dir) != 2 {
		t.Fatalf("tear down not retried (%d calls)", e.empty.tearDownCount(dir))
	}
}

// The kubelet's TestWaitForAttachAndMountError, with nodekit's plugins: a
// volume without a plugin fails processing; nothing is attachable.
func TestWaitForAttachAndMountErrorText(t *testing.T) {
	pod := testPod("abc", "1234", "vol1", "rbd2", "rbd02", "cm3")
	e := newEnv(t, pod)
	e.cm.setFail(errors.New("fake mount failure"), nil)
	e.sync()
	err := e.m.WaitForAttachAndMount(context.Background(), pod)
	want := `unmounted volumes=[cm3 rbd02 rbd2], unattached volumes=[], failed to process volumes=[rbd02 rbd2]: ` +
		`MountVolume.SetUp failed for volume "cm3": fake mount failure; ` +
		`volumemgr: no volume plugin: volume "rbd02"; volumemgr: no volume plugin: volume "rbd2"`
	if err == nil || err.Error() != want {
		t.Fatalf("WaitForAttachAndMount =\n%v\nwant\n%s", err, want)
	}
}

func TestWaitForAttachAndMountTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := testPod("abc", "1234", "vol2", "vol1")
		e := newEnv(t, pod)
		ch := waitResult(func() error { return e.m.WaitForAttachAndMount(context.Background(), pod) })
		synctest.Wait()
		e.clock.Step(DefaultWaitTimeout)
		err := <-ch
		want := "unmounted volumes=[vol1 vol2], unattached volumes=[], failed to process volumes=[vol1 vol2]: timed out waiting for the condition"
		if err == nil || err.Error() != want || !errors.Is(err, ErrTimeout) {
			t.Fatalf("WaitForAttachAndMount =\n%v\nwant\n%s", err, want)
		}
	})
}

func TestWaitForAttachAndMountSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := testPod("p", "uid1", "data", "cm1")
		e := newEnv(t, pod)
		ctx := context.Background()
		if err := e.m.WaitForAttachAndMount(ctx, testPod("none", "uid9")); err != nil {
			t.Fatalf("a pod without volumes: %v", err)
		}
		e.sync()
		cm := e.volDir(pod.UID, PluginNameConfigMap, "cm1")
		ch := waitResult(func() error { return e.m.WaitForAttachAndMount(ctx, pod) })
		synctest.Wait()
		select {
		case err := <-ch:
			// Everything is mounted: the wait returns at once, and the
			// reprocess it asked for remounts the configMap.
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("the wait blocked with every volume mounted")
		}
		e.sync()
		if got := e.cm.setUpCount(cm); got != 2 {
			t.Errorf("configMap SetUp calls after the wait's reprocess = %d, want 2", got)
		}

		// A new pod: the wait wakes when the reconciler mounts.
		pod2 := testPod("p2", "uid2", "data")
		e.pods.set(pod, pod2)
		ch = waitResult(func() error { return e.m.WaitForAttachAndMount(ctx, pod2) })
		synctest.Wait()
		e.sync()
		if err := <-ch; err != nil {
			t.Fatal(err)
		}

		// ctx ends: its error is the cause.
		pod3 := testPod("p3", "uid3", "data")
		cctx, cancel := context.WithCancel(ctx)
		ch = waitResult(func() error { return e.m.WaitForAttachAndMount(cctx, pod3) })
		synctest.Wait()
		cancel()
		if err := <-ch; !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "unmounted volumes=[data]") {
			t.Fatalf("after cancel: %v", err)
		}
	})
}

func TestWaitForUnmount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := testPod("p", "uid1", "data", "cm1")
		e := newEnv(t, pod)
		e.sync()
		ctx := context.Background()
		ch := waitResult(func() error { return e.m.WaitForUnmount(ctx, pod) })
		synctest.Wait()
		e.clock.Step(DefaultWaitTimeout)
		want := "mounted volumes=[kubernetes.io/configmap/uid1-cm1 kubernetes.io/empty-dir/uid1-data]: timed out waiting for the condition"
		if err := <-ch; err == nil || err.Error() != want {
			t.Fatalf("WaitForUnmount = %v, want %s", err, want)
		}
		ch = waitResult(func() error { return e.m.WaitForUnmount(ctx, pod) })
		synctest.Wait()
		e.pods.setRemoved(pod.UID)
		e.sync()
		if err := <-ch; err != nil {
			t.Fatalf("WaitForUnmount after the tear down = %v", err)
		}
	})
}

func TestRunMountsAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := testPod("p", "uid1", "data")
		pods := newFakePods(pod)
		empty := stubEmptyDir()
		podsDir := filepath.Join(t.TempDir(), "pods")
		// Real clock inside the bubble: the loops' tickers run on virtual
		// time.
		m, err := New(Config{PodsDir: podsDir, Plugins: []Plugin{empty}})
		if err != nil {
			t.Fatal(err)
		}
		m.SetPodSource(pods, pods, pods.sourcesReady)
		ctx, cancel := context.WithCancel(context.Background())
		done := waitResult(func() error { return m.Run(ctx) })
		if err := m.WaitForAttachAndMount(ctx, pod); err != nil {
			t.Fatal(err)
		}
		if err := m.Run(ctx); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("second Run = %v, want ErrAlreadyRan", err)
		}
		pods.set()
		pods.setRemoved(pod.UID)
		if err := m.WaitForUnmount(ctx, pod); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v", err)
		}
	})
}

func TestReconstructAndCleanOrphans(t *testing.T) {
	kept := testPod("kept", "uid-kept", "data")
	e := newEnv(t, kept)
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o750); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keptDir := mk(e.volDir(kept.UID, PluginNameEmptyDir, "data"))
	if err := os.WriteFile(filepath.Join(keptDir, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	goneDir := mk(e.volDir("uid-gone", PluginNameEmptyDir, "data"))
	goneCM := mk(e.volDir("uid-gone", PluginNameConfigMap, "cm1"))
	// Volumes of a plugin that is not configured: cleaned when no pod
	// wants a volume of that name (the kubelet's TestCleanOrphanVolumes).
	orphanGone := mk(e.volDir("uid-gone", "example.com/nfs", "share"))
	orphanKept := mk(e.volDir(kept.UID, "example.com/nfs", "data"))
	// Left-over subPath bind target of the gone pod.
	subTarget := mk(filepath.Join(e.podsDir, "uid-gone", subPathsDirName, "data", "c", "0"))
	// A symlinked pod dir pointing outside is never entered.
	outside := mk(filepath.Join(t.TempDir(), "outside", "volumes", EscapePluginName(PluginNameEmptyDir), "data"))
	if err := os.Symlink(filepath.Dir(filepath.Dir(filepath.Dir(outside))), filepath.Join(e.podsDir, "uid-link")); err != nil {
		t.Fatal(err)
	}

	if err := e.m.Reconstruct(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !e.m.asw.podHasVolumes("uid-gone") || !e.m.asw.podHasVolumes(kept.UID) || e.m.asw.podHasVolumes("uid-link") {
		t.Fatal("reconstruction did not find the volumes on disk")
	}
	if len(e.m.GetMountedVolumesForPod(kept.UID)) != 0 {
		t.Fatal("a reconstructed volume counts as mounted before it is set up again")
	}
	if got := e.m.GetVolumesInUse(); len(got) != 3 {
		t.Fatalf("GetVolumesInUse after reconstruction = %v", got)
	}

	// Sources not ready: nothing is torn down, the wanted volume is set up.
	e.pods.setReady(false)
	e.sync()
	if !exists(goneDir) || !exists(goneCM) || !exists(orphanGone) {
		t.Fatal("cleaned before the populator HasAddedPods")
	}
	if e.empty.setUpCount(keptDir) != 1 || len(e.m.GetMountedVolumesForPod(kept.UID)) != 1 {
		t.Fatal("the wanted reconstructed volume was not set up again")
	}
	if !exists(filepath.Join(keptDir, "f")) {
		t.Fatal("content of a kept volume lost")
	}

	e.pods.setReady(true)
	e.sync()
	if exists(goneDir) || exists(goneCM) || e.empty.tearDownCount(goneDir) != 1 || e.cm.tearDownCount(goneCM) != 1 {
		t.Fatal("volumes of a gone pod not torn down")
	}
	if exists(orphanGone) {
		t.Fatal("orphan dir of an unknown plugin not removed")
	}
	if !exists(orphanKept) {
		t.Fatal("orphan dir whose name a pod wants was removed")
	}
	if exists(subTarget) || exists(filepath.Join(e.podsDir, "uid-gone", subPathsDirName)) {
		t.Fatal("left-over subPath target not removed")
	}
	if !exists(outside) || e.empty.tearDownCount(filepath.Join(e.podsDir, "uid-link", "volumes", EscapePluginName(PluginNameEmptyDir), "data")) != 0 {
		t.Fatal("a symlinked pod dir was followed")
	}
	if e.m.asw.podHasVolumes("uid-gone") {
		t.Fatal("gone pod still in the actual state")
	}
}

func TestReconstructMissingPodsDir(t *testing.T) {
	e := newEnv(t)
	if err := e.m.Reconstruct(context.Background()); err != nil {
		t.Fatalf("missing pods dir: %v", err)
	}
}

// subPathStub records PrepareSubPath calls.
type subPathStub struct {
	calls    []string
	cleanups map[string]int
}

func (s *subPathStub) prepare(volumeDir, subPath, target string) (string, func() error, error) {
	s.calls = append(s.calls, volumeDir+"|"+subPath+"|"+target)
	return target, func() error { s.cleanups[target]++; return nil }, nil
}

func TestContainerMounts(t *testing.T) {
	pod := testPod("p", "uid1", "data", "cm1", "host1")
	hostToContainer := v1.MountPropagationHostToContainer
	bidi := v1.MountPropagationBidirectional
	c := &pod.Spec.Containers[0]
	c.VolumeMounts[0].SubPath = "logs/app"
	c.VolumeMounts[1].MountPropagation = &hostToContainer
	c.VolumeMounts[2].ReadOnly = true
	c.VolumeMounts = append(c.VolumeMounts,
		v1.VolumeMount{Name: "data", MountPath: "/all", MountPropagation: &bidi},
		v1.VolumeMount{Name: "data", MountPath: "/expr", SubPathExpr: "$(POD)/x"})
	c.Env = []v1.EnvVar{{Name: "POD", Value: "p"}}

	e := newEnv(t, pod)
	stub := &subPathStub{cleanups: map[string]int{}}
	e.m.cfg.PrepareSubPath = stub.prepare
	ctx := context.Background()
	if _, err := e.m.ContainerMounts(ctx, pod, c); !errors.Is(err, ErrVolumeNotMounted) {
		t.Fatalf("before mounting: %v, want ErrVolumeNotMounted", err)
	}
	e.sync()
	got, err := e.m.ContainerMounts(ctx, pod, c)
	if err != nil {
		t.Fatal(err)
	}
	data := e.volDir(pod.UID, PluginNameEmptyDir, "data")
	sub0 := filepath.Join(e.podsDir, "uid1", "volume-subpaths", "data", "c", "0")
	sub4 := filepath.Join(e.podsDir, "uid1", "volume-subpaths", "data", "c", "4")
	private := runtimeapi.MountPropagation_PROPAGATION_PRIVATE
	want := []*runtimeapi.Mount{
		{ContainerPath: "/mnt/data", HostPath: sub0, Propagation: private},
		{ContainerPath: "/mnt/cm1", HostPath: e.volDir(pod.UID, PluginNameConfigMap, "cm1"), Readonly: true,
			Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER},
		{ContainerPath: "/mnt/host1", HostPath: e.volDir(pod.UID, PluginNameHostPath, "host1"), Readonly: true, Propagation: private},
		{ContainerPath: "/all", HostPath: data, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL},
		{ContainerPath: "/expr", HostPath: sub4, Propagation: private},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d mounts, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].String() != want[i].String() {
			t.Errorf("mount %d:\n got %v\nwant %v", i, got[i], want[i])
		}
	}
	wantCalls := []string{data + "|logs/app|" + sub0, data + "|p/x|" + sub4}
	if !reflect.DeepEqual(stub.calls, wantCalls) {
		t.Fatalf("PrepareSubPath calls %q, want %q", stub.calls, wantCalls)
	}
	// The container starts again: the old bind is undone first.
	if _, err := e.m.ContainerMounts(ctx, pod, c); err != nil {
		t.Fatal(err)
	}
	if stub.cleanups[sub0] != 1 || stub.cleanups[sub4] != 1 {
		t.Fatalf("cleanups after a restart: %v", stub.cleanups)
	}
	// The pod goes: subPath binds are undone before the tear down.
	e.pods.set()
	e.pods.setRemoved(pod.UID)
	e.sync()
	if stub.cleanups[sub0] != 2 || stub.cleanups[sub4] != 2 {
		t.Fatalf("cleanups after the tear down: %v", stub.cleanups)
	}
}

func TestContainerMountsRejects(t *testing.T) {
	pod := testPod("p", "uid1", "data")
	e := newEnv(t, pod)
	stub := &subPathStub{cleanups: map[string]int{}}
	e.m.cfg.PrepareSubPath = stub.prepare
	e.sync()
	bad := v1.MountPropagationMode("Sideways")
	for _, tc := range []struct {
		name string
		vm   v1.VolumeMount
		want error
	}{
		{"unknown volume", v1.VolumeMount{Name: "nope", MountPath: "/x"}, ErrVolumeNotFound},
		{"dotdot subPath", v1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "../../etc"}, ErrUnsafePath},
		{"absolute subPath", v1.VolumeMount{Name: "data", MountPath: "/x", SubPath: "/etc"}, ErrUnsafePath},
		{"expr to dotdot", v1.VolumeMount{Name: "data", MountPath: "/x", SubPathExpr: "$(UP)/etc"}, ErrUnsafePath},
		{"propagation", v1.VolumeMount{Name: "data", MountPath: "/x", MountPropagation: &bad}, ErrUnsupportedVolume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{tc.vm}, Env: []v1.EnvVar{{Name: "UP", Value: ".."}}}
			if _, err := e.m.ContainerMounts(context.Background(), pod, c); !errors.Is(err, tc.want) {
				t.Fatalf("ContainerMounts = %v, want %v", err, tc.want)
			}
		})
	}
	if len(stub.calls) != 0 {
		t.Fatalf("PrepareSubPath called for a rejected subPath: %q", stub.calls)
	}
	if m, err := e.m.ContainerMounts(context.Background(), pod, &v1.Container{Name: "c"}); m != nil || err != nil {
		t.Fatalf("no volumeMounts: %v, %v", m, err)
	}
}

func TestExpandEnv(t *testing.T) {
	env := []v1.EnvVar{{Name: "A", Value: "a"}, {Name: "F", ValueFrom: &v1.EnvVarSource{}}}
	for in, want := range map[string]string{
		"$(A)/x":   "a/x",
		"$(B)/x":   "$(B)/x",
		"$(F)":     "$(F)",
		"$$(A)":    "$(A)",
		"x$(A":     "x$(A",
		"plain":    "plain",
		"$":        "$",
		"$(A)$(A)": "aa",
	} {
		if got := expandEnv(in, env); got != want {
			t.Errorf("expandEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMetrics(t *testing.T) {
	pod := testPod("p", "uid1", "data", "cm1")
	pods := newFakePods(pod)
	reg := prometheus.NewPedanticRegistry()
	m, err := New(Config{PodsDir: filepath.Join(t.TempDir(), "pods"), Plugins: []Plugin{stubEmptyDir(), stubConfigMap()},
		Pods: pods, PodState: pods, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	m.PopulateOnce(context.Background())
	m.ReconcileOnce(context.Background())
	want := `
# HELP volume_manager_total_volumes Number of volumes in the volume manager, by plugin and state (desired_state_of_world, actual_state_of_world).
# TYPE volume_manager_total_volumes gauge
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="actual_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/configmap",state="desired_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="actual_state_of_world"} 1
volume_manager_total_volumes{plugin_name="kubernetes.io/empty-dir",state="desired_state_of_world"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "volume_manager_total_volumes"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.metrics.ops.WithLabelValues("mount", "success")); got != 2 {
		t.Fatalf("mount successes %v, want 2", got)
	}
	if _, err := New(Config{PodsDir: "/p", Registerer: reg}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("registering twice: %v", err)
	}
}

func TestMakeSubPathDirs(t *testing.T) {
	vol := t.TempDir()
	outside := t.TempDir()
	if err := makeSubPathDirs(vol, "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(vol, "a", "b", "c")); err != nil || !fi.IsDir() {
		t.Fatalf("a/b/c not made: %v", err)
	}
	if err := makeSubPathDirs(vol, "a/b/c"); err != nil {
		t.Fatalf("existing subPath: %v", err)
	}
	if err := os.Symlink(outside, filepath.Join(vol, "trap")); err != nil {
		t.Fatal(err)
	}
	if err := makeSubPathDirs(vol, "trap/x"); !errors.Is(err, ErrPathEscape) {
		t.Fatalf("through an escaping symlink: %v, want ErrPathEscape", err)
	}
	if exists(filepath.Join(outside, "x")) {
		t.Fatal("a dir was made outside the volume")
	}
	if err := makeSubPathDirs(vol, "../x"); !errors.Is(err, ErrUnsafePath) {
		t.Fatalf("../x: %v", err)
	}
}
