package imagegc_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

const mib = 1 << 20

// images is an in-test image service: images with sizes and pins, an image
// file system whose free space grows as images are removed, and the
// images containers use.
type images struct {
	mu        sync.Mutex
	list      []*runtimeapi.Image
	inUse     []string
	capacity  uint64
	available uint64
	removed   []string
	failIDs   map[string]bool
	listErr   error
}

func (f *images) add(id string, size uint64, tags ...string) *runtimeapi.Image {
	img := &runtimeapi.Image{Id: id, Size: size, RepoTags: tags}
	f.list = append(f.list, img)
	return img
}

func (f *images) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	return slices.Clone(f.list), nil
}

func (f *images) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failIDs[spec.GetImage()] {
		return errors.New("image is busy")
	}
	for i, img := range f.list {
		if img.Id == spec.GetImage() {
			f.list = slices.Delete(f.list, i, i+1)
			f.removed = append(f.removed, img.Id)
			f.available += img.Size
			return nil
		}
	}
	return nil
}

func (f *images) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (f *images) ImagesInUse(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inUse), nil
}

func (f *images) fsStats(context.Context) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.capacity, f.available, nil
}

func (f *images) setInUse(refs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse = refs
}

func (f *images) removedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func newManager(t *testing.T, f *images, clk *clocktesting.FakeClock, edit func(*imagegc.Config)) *imagegc.Manager {
	t.Helper()
	cfg := imagegc.Config{Images: f, InUse: f, FsStats: f.fsStats, Clock: clk}
	if edit != nil {
		edit(&cfg)
	}
	m, err := imagegc.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func start() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func TestConfigValidation(t *testing.T) {
	f := &images{}
	for _, tc := range []struct {
		name  string
		edit  func(*imagegc.Config)
		field string
	}{
		{"no images", func(c *imagegc.Config) { c.Images = nil }, "Images"},
		{"no in-use", func(c *imagegc.Config) { c.InUse = nil }, "InUse"},
		{"high over 100", func(c *imagegc.Config) { c.HighThresholdPercent, c.LowThresholdPercent = 101, 80 }, "HighThresholdPercent"},
		{"high negative", func(c *imagegc.Config) { c.HighThresholdPercent, c.LowThresholdPercent = -1, 0 }, "HighThresholdPercent"},
		{"low negative", func(c *imagegc.Config) { c.HighThresholdPercent, c.LowThresholdPercent = 90, -1 }, "LowThresholdPercent"},
		{"low above high", func(c *imagegc.Config) { c.HighThresholdPercent, c.LowThresholdPercent = 70, 80 }, "LowThresholdPercent"},
		{"min age negative", func(c *imagegc.Config) { c.MinAge = -time.Second }, "MinAge"},
		{"max age negative", func(c *imagegc.Config) { c.MaxAge = -time.Second }, "MaxAge"},
		{"max age below min", func(c *imagegc.Config) { c.MinAge, c.MaxAge = time.Hour, time.Minute }, "MaxAge"},
		{"period negative", func(c *imagegc.Config) { c.Period = -time.Second }, "Period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := imagegc.Config{Images: f, InUse: f}
			tc.edit(&cfg)
			_, err := imagegc.New(cfg)
			if !errors.Is(err, imagegc.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("New = %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	for _, ok := range [][2]int{{0, 0}, {100, 100}, {100, 0}, {50, 50}} {
		if _, err := imagegc.New(imagegc.Config{Images: f, InUse: f, HighThresholdPercent: ok[0], LowThresholdPercent: ok[1]}); err != nil {
			t.Errorf("high %d low %d: %v", ok[0], ok[1], err)
		}
	}
}

// TestDetectImages: first seen times are kept, in-use images get a last
// used time, removed images are forgotten (kubelet TestDetectImages*).
func TestDetectImages(t *testing.T) {
	clk := start()
	f := &images{}
	f.add("sha256:a", 1024, "docker.io/library/a:1")
	f.add("sha256:b", 2048)
	f.setInUse("a:1")
	m := newManager(t, f, clk, nil)
	if err := m.DetectImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	t0 := clk.Now()
	got := m.Images()
	if len(got) != 2 || got[0].ID != "sha256:a" || !got[0].FirstDetected.Equal(t0) || !got[0].LastUsed.Equal(t0) ||
		got[0].SizeBytes != 1024 || !got[1].LastUsed.IsZero() {
		t.Fatalf("records %+v", got)
	}
	clk.Step(time.Minute)
	f.add("sha256:c", 1)
	f.mu.Lock()
	f.list = f.list[1:] // a is gone
	f.mu.Unlock()
	if err := m.DetectImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	got = m.Images()
	if len(got) != 2 || got[0].ID != "sha256:b" || !got[0].FirstDetected.Equal(t0) ||
		got[1].ID != "sha256:c" || !got[1].FirstDetected.Equal(clk.Now()) {
		t.Fatalf("after a change %+v", got)
	}
}

// TestDeleteUnusedImages: every unused image old enough goes; in-use,
// pinned and sandbox images stay (kubelet
// TestDeleteUnusedImagesRemoveAllUnusedImages, ExemptSandboxImage,
// TestDoNotDeletePinnedImage, TestFreeSpaceImagesInUseContainersAreIgnored).
func TestDeleteUnusedImages(t *testing.T) {
	clk := start()
	f := &images{}
	f.add("sha256:used", 10, "docker.io/library/used:1")
	f.add("sha256:free1", 20, "docker.io/library/free1:1")
	f.add("sha256:free2", 30)
	f.add("sha256:pinned", 40, "registry.example/pinned:1").Pinned = true
	f.add("sha256:pause", 50, "registry.k8s.io/pause:3.10")
	f.add("sha256:byid", 60)
	f.setInUse("used:1", "sha256:byid")
	m := newManager(t, f, clk, func(c *imagegc.Config) { c.SandboxImage = "registry.k8s.io/pause:3.10" })
	if err := m.DeleteUnusedImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.removedIDs(); len(got) != 0 {
		t.Fatalf("removed %v at first sight: MinAge (2m) must keep them", got)
	}
	clk.Step(imagegc.DefaultMinAge)
	if err := m.DeleteUnusedImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := f.removedIDs()
	slices.Sort(got)
	if want := []string{"sha256:free1", "sha256:free2"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
}

// TestGarbageCollectLRU: above the high threshold, images go least recently
// used first (never used before used; ties by first detection) until the
// low threshold is reached (kubelet TestFreeSpaceRemoveByLeastRecentlyUsed,
// TestFreeSpaceTiesBrokenByDetectedTime, TestGarbageCollectBelowSuccess).
func TestGarbageCollectLRU(t *testing.T) {
	clk := start()
	f := &images{capacity: 1000 * mib, available: 100 * mib} // 90% used
	f.add("sha256:old-used", 60*mib)
	f.add("sha256:never-used-1", 30*mib)
	f.setInUse("sha256:old-used")
	m := newManager(t, f, clk, nil)
	if err := m.DetectImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	f.add("sha256:never-used-2", 30*mib)
	f.add("sha256:recent-used", 500*mib)
	f.setInUse("sha256:recent-used")
	if err := m.DetectImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	f.setInUse()
	clk.Step(5 * time.Minute)
	// Low 80%: 200 MiB must be free, 100 MiB more. never-used-1 (30),
	// never-used-2 (30), old-used (60) = 120 >= 100; recent-used stays.
	if err := m.GarbageCollect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := f.removedIDs(), []string{"sha256:never-used-1", "sha256:never-used-2", "sha256:old-used"}; !slices.Equal(got, want) {
		t.Fatalf("removed %v, want %v in that order", got, want)
	}
}

// TestGarbageCollectBelowThreshold: under the high threshold nothing goes
// (kubelet TestGarbageCollectBelowLowThreshold).
func TestGarbageCollectBelowThreshold(t *testing.T) {
	clk := start()
	f := &images{capacity: 1000, available: 160} // 84% used: below 85
	f.add("sha256:a", 100)
	m := newManager(t, f, clk, nil)
	clk.Step(time.Hour)
	if err := m.GarbageCollect(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	f.mu.Lock()
	f.available = 150 // 85%: at the threshold
	f.mu.Unlock()
	if err := m.GarbageCollect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.removedIDs(); len(got) != 1 {
		t.Fatalf("removed %v: at 85%% usage the image (first seen an hour before) must go", got)
	}
}

// TestGarbageCollectNotEnoughFreed: the error says how much was freed and
// needed (kubelet TestGarbageCollectNotEnoughFreed), and a young image is
// not removed until MinAge passed (TestGarbageCollectImageNotOldEnough).
func TestGarbageCollectNotEnoughFreed(t *testing.T) {
	clk := start()
	f := &images{capacity: 1000, available: 50} // 95% used, 150 to free
	f.add("sha256:small", 40)
	f.add("sha256:used", 500)
	f.setInUse("sha256:used")
	m := newManager(t, f, clk, func(c *imagegc.Config) { c.MinAge = time.Minute })
	err := m.GarbageCollect(t.Context())
	var fse *imagegc.FreeSpaceError
	if !errors.Is(err, imagegc.ErrNotEnoughFreed) || !errors.As(err, &fse) || fse.FreedBytes != 0 || fse.NeededBytes != 150 || fse.UsagePercent != 95 {
		t.Fatalf("young image: GarbageCollect = %v (%+v), want freed 0 of 150", err, fse)
	}
	if len(f.removedIDs()) != 0 {
		t.Fatal("an image younger than MinAge was removed")
	}
	clk.Step(time.Minute)
	err = m.GarbageCollect(t.Context())
	if !errors.As(err, &fse) || fse.FreedBytes != 40 || fse.NeededBytes != 150 {
		t.Fatalf("GarbageCollect = %v, want freed 40 of 150", err)
	}
	if !strings.Contains(err.Error(), "freed 40 of the 150 bytes") {
		t.Errorf("message %q", err)
	}
	if got := f.removedIDs(); !slices.Equal(got, []string{"sha256:small"}) {
		t.Fatalf("removed %v", got)
	}
}

// TestGarbageCollectMaxAge: with MaxAge, images unused for longer go even
// with a free disk, once the manager itself is older than MaxAge (kubelet
// TestGarbageCollectImageTooOld, TestGarbageCollectImageMaxAgeDisabled).
func TestGarbageCollectMaxAge(t *testing.T) {
	for _, maxAge := range []time.Duration{0, 10 * time.Minute} {
		clk := start()
		f := &images{capacity: 1000, available: 900}
		f.add("sha256:stale", 10)
		f.add("sha256:used", 10)
		f.setInUse("sha256:used")
		m := newManager(t, f, clk, func(c *imagegc.Config) { c.MaxAge = maxAge })
		if err := m.GarbageCollect(t.Context()); err != nil {
			t.Fatal(err)
		}
		clk.Step(10 * time.Minute)
		if err := m.GarbageCollect(t.Context()); err != nil || len(f.removedIDs()) != 0 {
			t.Fatalf("max age %v: at exactly MaxAge: %v, removed %v", maxAge, err, f.removedIDs())
		}
		clk.Step(time.Second)
		if err := m.GarbageCollect(t.Context()); err != nil {
			t.Fatal(err)
		}
		want := []string(nil)
		if maxAge > 0 {
			want = []string{"sha256:stale"}
		}
		if got := f.removedIDs(); !slices.Equal(got, want) {
			t.Fatalf("max age %v: removed %v, want %v", maxAge, got, want)
		}
	}
}

// TestGarbageCollectErrors: a failed removal is reported and the rest goes
// on; capacity 0 and list failures are errors.
func TestGarbageCollectErrors(t *testing.T) {
	clk := start()
	f := &images{capacity: 1000, available: 0, failIDs: map[string]bool{"sha256:a": true}}
	f.add("sha256:a", 100)
	f.add("sha256:b", 100)
	m := newManager(t, f, clk, func(c *imagegc.Config) { c.MinAge = time.Nanosecond })
	if err := m.DetectImages(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	err := m.GarbageCollect(t.Context())
	if !errors.Is(err, imagegc.ErrRuntime) || !strings.Contains(err.Error(), "image is busy") {
		t.Fatalf("GarbageCollect = %v", err)
	}
	if got := f.removedIDs(); !slices.Equal(got, []string{"sha256:b"}) {
		t.Fatalf("removed %v", got)
	}
	f.capacity = 0
	if err := m.GarbageCollect(t.Context()); !errors.Is(err, imagegc.ErrFsStats) {
		t.Fatalf("capacity 0: %v", err)
	}
	f.listErr = errors.New("down")
	if err := m.DeleteUnusedImages(t.Context()); !errors.Is(err, imagegc.ErrRuntime) {
		t.Fatalf("list failure: %v", err)
	}
}

// TestOverFakeRuntime: on runtime/fake, the image of a (stopped) container
// and the pause image are kept; the other unused image is removed; the
// metric counts it.
func TestOverFakeRuntime(t *testing.T) {
	clk := start()
	rt, err := fake.New(fake.Config{Clock: clk, Images: []string{"busybox:1", "nginx:1", "registry.k8s.io/pause:3.10"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "ns", Uid: "u1"}}
	sb, err := rt.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Image: &runtimeapi.ImageSpec{Image: "busybox:1"},
	}, sbCfg); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := imagegc.New(imagegc.Config{
		Images: rt, InUse: imagegc.Containers(rt), Clock: clk, Registerer: reg,
		FsStats: func(context.Context) (uint64, uint64, error) { return 100 * mib, 0, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DetectImages(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	err = m.GarbageCollect(ctx)
	if !errors.Is(err, imagegc.ErrNotEnoughFreed) {
		t.Fatalf("GarbageCollect = %v, want not enough freed (two images stay)", err)
	}
	left, err := rt.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for _, img := range left {
		tags = append(tags, img.RepoTags...)
	}
	slices.Sort(tags)
	if want := []string{"docker.io/library/busybox:1", "registry.k8s.io/pause:3.10"}; !slices.Equal(tags, want) {
		t.Fatalf("images left %v, want %v", tags, want)
	}
	if n := testutil.ToFloat64(mustCounter(t, reg)); n != 1 {
		t.Errorf("kubelet_image_garbage_collected_total{reason=space} = %v, want 1", n)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kubelet_image_garbage_collected_total" {
			for _, metric := range mf.GetMetric() {
				for _, l := range metric.GetLabel() {
					if l.GetName() == "reason" && l.GetValue() == "space" {
						return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return metric.GetCounter().GetValue() })
					}
				}
			}
		}
	}
	t.Fatal("no space counter")
	return nil
}
