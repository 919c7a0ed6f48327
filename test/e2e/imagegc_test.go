//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kubetypes"
)

// noStats is an eviction stats provider that observes nothing: the image
// GC test needs the eviction wiring (which makes the image GC), not its
// thresholds.
type noStats struct{}

func (noStats) Summary(context.Context) (*eviction.Summary, error) {
	return &eviction.Summary{Time: time.Now()}, nil
}

// ctrBinary is the ctr that goes with the containerd under test.
func ctrBinary() string {
	if os.Getenv("NODEKIT_CONTAINERD") == "2" {
		p := filepath.Join(getenv("NODEKIT_CONTAINERD2_CACHE", "/var/cache/nodekit/containerd-v2.4.2"), "ctr")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "ctr"
}

// importVictimImage builds and imports a small image nothing uses (its one
// file random, so its id is its own) and returns its name.
func importVictimImage(t *testing.T, endpoint string) string {
	t.Helper()
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "victim")
	if err := os.WriteFile(bin, []byte("victim "+hex.EncodeToString(rnd[:])+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	name := "localhost/nodekit/gc-victim-" + hex.EncodeToString(rnd[:4]) + ":1"
	tar := filepath.Join(dir, "victim.tar")
	if out, err := exec.Command("go", "run", "../../hack/mkimage", "-kind", "pause", "-bin", bin, "-name", name, "-out", tar).CombinedOutput(); err != nil {
		t.Fatalf("building the victim image: %v\n%s", err, out)
	}
	sock := endpoint
	if len(sock) > len("unix://") && sock[:len("unix://")] == "unix://" {
		sock = sock[len("unix://"):]
	}
	if out, err := exec.Command(ctrBinary(), "-a", sock, "-n", "k8s.io", "images", "import", tar).CombinedOutput(); err != nil {
		t.Fatalf("importing the victim image: %v\n%s", err, out)
	}
	return name
}

// TestImageGCKeepsPauseImage runs the in-process agent on containerd with
// eviction (and so image GC) wired by default and no SandboxImage set, and
// forces image GC while one busybox pod runs: the image file system
// reported 99 % used, MinAge 1 ns, then GarbageCollect and
// DeleteUnusedImages. An unused image is removed, proving the collection
// ran; the pause image must stay (containerd 1.6 pins nothing: it is kept
// as the sandbox image its verbose CRI Status names and as the running
// sandbox's image; containerd 2.x pins it), so a second pod started
// afterwards runs. Each source names the pause image on its own: the
// runtime's configured sandbox image (1.6) or its pin (2.x), and the
// sandboxes' images.
func TestImageGCKeepsPauseImage(t *testing.T) {
	e := volumeEnv(t)
	e.cleanup(t)
	t.Cleanup(func() { e.cleanup(t) })
	pause := getenv("NODEKIT_PAUSE_IMAGE", "localhost/nodekit/pause:1")
	ctx := t.Context()
	st, err := e.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pause}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("the pause image %s is not there before the test: %v %v", pause, st, err)
	}
	pauseID := st.GetImage().GetId()
	t.Logf("containerd %s; pause image %s (%s, pinned %v)", getenv("NODEKIT_CONTAINERD", "1.6"), pause, pauseID, st.GetImage().GetPinned())
	namesPause := func(refs []string) bool {
		return slices.ContainsFunc(refs, func(s string) bool { return s == pause || s == pauseID })
	}

	// The runtime's sandbox image, as image GC finds it: containerd 1.6
	// names it in its verbose Status; 2.x reports it pinned (its verbose
	// Status names no image).
	configured, err := imagegc.RuntimeSandboxImage(e.cri).ImagesInUse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox images named by the runtime's verbose Status: %v", configured)
	if os.Getenv("NODEKIT_CONTAINERD") == "2" {
		if !st.GetImage().GetPinned() {
			t.Errorf("containerd 2.x does not report its sandbox image %s as pinned", pause)
		}
	} else if !namesPause(configured) {
		t.Errorf("the sandbox image the runtime's verbose Status names (%v) is not the pause image %s", configured, pause)
	}

	sets := make(chan []*v1.Pod, 1)
	statuses := newStatusSink()
	var built nodekit.EvictionParts
	agent, err := e.builder(t.TempDir(), "").
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))).
		WithStatusSink(statuses).
		WithPodSource(kubetypes.SourceAPI, podSets(kubetypes.SourceAPI, sets)).
		WithEvictionOptions(eviction.Config{Stats: noStats{}}, nodekit.EvictionOptions{
			Built: &built,
			ImageGC: imagegc.Config{
				MinAge:  time.Nanosecond,
				FsStats: func(context.Context) (uint64, uint64, error) { return 100 << 30, 1 << 30, nil },
			},
		}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if built.ImageGC == nil {
		t.Fatal("the Builder made no image GC")
	}
	defer runAgent(t, agent, 30*time.Second)()

	// One pod keeps busybox in use (the other e2e tests need it).
	first, second := "gc-first-"+nodeName, "gc-second-"+nodeName
	cmd := "trap 'exit 0' TERM; sleep 3600 & wait"
	pods := []*v1.Pod{evictionTestPod(first, e.busybox, nil, cmd)}
	sets <- pods
	running := func(name string) func() (bool, string) {
		return func() (bool, string) {
			st := statuses.get(name)
			return st.Phase == v1.PodRunning, fmt.Sprintf("%s %s %s", st.Phase, st.Reason, st.Message)
		}
	}
	waitFor(t, 90*time.Second, "the first pod running", running(first))
	used, err := imagegc.Sandboxes(e.cri).ImagesInUse(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !namesPause(used) {
		t.Errorf("the images the sandboxes use (%v) do not name the pause image %s", used, pause)
	}

	victim := importVictimImage(t, e.endpoint)
	t.Cleanup(func() { _ = e.cri.RemoveImage(context.WithoutCancel(ctx), &runtimeapi.ImageSpec{Image: victim}) })
	if err := built.ImageGC.DetectImages(ctx); err != nil {
		t.Fatal(err)
	}
	// Forced: every unused image past MinAge (1 ns) goes.
	waitFor(t, 30*time.Second, "forced image GC removing the unused image", func() (bool, string) {
		var fse *imagegc.FreeSpaceError
		if err := built.ImageGC.GarbageCollect(ctx); err != nil && !errors.As(err, &fse) {
			t.Fatalf("GarbageCollect: %v", err)
		}
		if err := built.ImageGC.DeleteUnusedImages(ctx); err != nil {
			t.Fatalf("DeleteUnusedImages: %v", err)
		}
		st, err := e.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: victim}, false)
		return err == nil && st.GetImage() == nil, fmt.Sprintf("%v %v", st.GetImage(), err)
	})
	for _, img := range []string{pause, e.busybox} {
		if st, err := e.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img}, false); err != nil || st.GetImage() == nil {
			t.Fatalf("forced image GC removed %s (%v)", img, err)
		}
	}

	// A new pod (a new sandbox) starts after the collection.
	sets <- append(pods, evictionTestPod(second, e.busybox, nil, cmd))
	waitFor(t, 90*time.Second, "the second pod running after image GC", running(second))
}
