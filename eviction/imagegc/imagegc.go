package imagegc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults, as the kubelet's.
const (
	DefaultHighThresholdPercent = 85
	DefaultLowThresholdPercent  = 80
	DefaultMinAge               = 2 * time.Minute
	DefaultPeriod               = 5 * time.Minute
)

// ImageService is the part of the CRI image service the manager uses.
// runtime/remote's client and runtime/fake's runtime satisfy it.
type ImageService interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// InUse lists the images that containers (running or not) and sandboxes
// still use. Each entry may be an image id, a repo tag or a repo digest;
// an image matching any entry is never removed. Containers adapts the CRI
// container list.
type InUse interface {
	ImagesInUse(ctx context.Context) ([]string, error)
}

// InUseFunc adapts a function to InUse.
type InUseFunc func(ctx context.Context) ([]string, error)

// ImagesInUse calls f.
func (f InUseFunc) ImagesInUse(ctx context.Context) ([]string, error) { return f(ctx) }

// ContainerLister is the CRI container list call.
type ContainerLister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// Containers is the InUse of every container the runtime lists, in any
// state (a dead container keeps its image until container GC removes it,
// as in the kubelet): their image ids and the images their specs name.
func Containers(l ContainerLister) InUse {
	return InUseFunc(func(ctx context.Context) ([]string, error) {
		cs, err := l.ListContainers(ctx, nil)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, 2*len(cs))
		for _, c := range cs {
			if c.GetImageRef() != "" {
				out = append(out, c.GetImageRef())
			}
			if c.GetImageId() != "" && c.GetImageId() != c.GetImageRef() {
				out = append(out, c.GetImageId())
			}
			if img := c.GetImage().GetImage(); img != "" {
				out = append(out, img)
			}
		}
		return out, nil
	})
}

// FsStatsFunc reports the image file system's size and free bytes.
type FsStatsFunc func(ctx context.Context) (capacity, available uint64, err error)

// Config configures a Manager.
type Config struct {
	// Images is the runtime's image service (required).
	Images ImageService
	// InUse lists the images in use (required); see Containers.
	InUse InUse
	// FsStats reports the image file system's capacity and free space. Nil
	// means statfs(2) on the first file system ImageFsInfo names (the agent
	// must then see the runtime's file system at that path).
	FsStats FsStatsFunc
	// SandboxImage (the pause image) is never removed, used or not. Images
	// the runtime reports as Pinned are never removed either.
	SandboxImage string
	// HighThresholdPercent: GarbageCollect acts when the image file
	// system's usage is at or above it; LowThresholdPercent: it frees down
	// to this. Both in 0..100, low <= high; both zero means the defaults 85
	// and 80.
	HighThresholdPercent int
	LowThresholdPercent  int
	// MinAge: an image first seen less than MinAge ago is kept (default 2m;
	// negative is invalid).
	MinAge time.Duration
	// MaxAge, if > 0, removes unused images not used for longer than
	// MaxAge on every GarbageCollect, whatever the disk usage, once the
	// manager has existed for MaxAge. It must not be below MinAge.
	MaxAge time.Duration
	// Period between GarbageCollect calls in Run (default 5m).
	Period time.Duration
	// Recorder records ImageGCFailed on the node (NodeName) when Run's
	// collection fails twice in a row, as the kubelet does (the first
	// failure may be stats not yet ready). Nil records none.
	Recorder kubetypes.EventRecorder
	// NodeName names the node of ImageGCFailed.
	NodeName   string
	Clock      clock.Clock
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

// ImageRecord is what the manager knows of one image.
type ImageRecord struct {
	ID string
	// Tags are the image's repo tags.
	Tags []string
	// FirstDetected is when the manager first saw the image; LastUsed when
	// it last saw it in use (zero: never).
	FirstDetected, LastUsed time.Time
	SizeBytes               uint64
	Pinned                  bool
}

type record struct {
	tags, digests           []string
	firstDetected, lastUsed time.Time
	size                    uint64
	pinned                  bool
}

// Manager removes unused images, least recently used first, as the
// kubelet's image garbage collector does.
type Manager struct {
	cfg     Config
	log     *zap.Logger
	began   time.Time
	removed *prometheus.CounterVec
	once    lifecycle.Once

	opMu sync.Mutex // one detection or collection at a time
	// failedBefore: Run's last collection failed.
	failedBefore bool

	mu      sync.Mutex
	records map[string]*record
}

// New validates cfg, fills defaults and returns a Manager. It starts
// nothing and does no I/O.
func New(cfg Config) (*Manager, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if cfg.Images == nil {
		bad("Images is nil")
	}
	if cfg.InUse == nil {
		bad("InUse is nil")
	}
	if cfg.HighThresholdPercent == 0 && cfg.LowThresholdPercent == 0 {
		cfg.HighThresholdPercent, cfg.LowThresholdPercent = DefaultHighThresholdPercent, DefaultLowThresholdPercent
	}
	switch {
	case cfg.HighThresholdPercent < 0 || cfg.HighThresholdPercent > 100:
		bad("HighThresholdPercent %d is outside 0..100", cfg.HighThresholdPercent)
	case cfg.LowThresholdPercent < 0 || cfg.LowThresholdPercent > 100:
		bad("LowThresholdPercent %d is outside 0..100", cfg.LowThresholdPercent)
	case cfg.LowThresholdPercent > cfg.HighThresholdPercent:
		bad("LowThresholdPercent %d is above HighThresholdPercent %d", cfg.LowThresholdPercent, cfg.HighThresholdPercent)
	}
	if cfg.MinAge < 0 {
		bad("MinAge %v is negative", cfg.MinAge)
	}
	if cfg.MinAge == 0 {
		cfg.MinAge = DefaultMinAge
	}
	switch {
	case cfg.MaxAge < 0:
		bad("MaxAge %v is negative", cfg.MaxAge)
	case cfg.MaxAge > 0 && cfg.MaxAge < cfg.MinAge:
		bad("MaxAge %v is below MinAge %v", cfg.MaxAge, cfg.MinAge)
	}
	if cfg.Period < 0 {
		bad("Period %v is negative", cfg.Period)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	m := &Manager{
		cfg:     cfg,
		log:     cfg.Logger.Named("imagegc"),
		began:   cfg.Clock.Now(),
		records: map[string]*record{},
	}
	if cfg.FsStats == nil {
		m.cfg.FsStats = m.statfsImageFs
	}
	if cfg.Registerer != nil {
		m.removed = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kubelet_image_garbage_collected_total",
			Help: "Total number of images garbage collected by the image garbage collector, by reason (age or space).",
		}, []string{"reason"})
		if err := cfg.Registerer.Register(m.removed); err != nil {
			return nil, fmt.Errorf("%w: Registerer: %v", ErrInvalidConfig, err)
		}
	}
	return m, nil
}

// statfsImageFs is the default FsStats: statfs on the image file system
// the runtime names.
func (m *Manager) statfsImageFs(ctx context.Context) (uint64, uint64, error) {
	info, err := m.cfg.Images.ImageFsInfo(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: ImageFsInfo: %w", ErrRuntime, err)
	}
	fss := info.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return 0, 0, fmt.Errorf("%w: the runtime names no image file system", ErrFsStats)
	}
	path := fss[0].GetFsId().GetMountpoint()
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("%w: statfs %s: %w", ErrFsStats, path, err)
	}
	bs := uint64(st.Bsize)
	return st.Blocks * bs, st.Bavail * bs, nil
}

// matches says whether image (id, tags, digests) is named by ref.
func (r *record) matches(id, ref string) bool {
	if ref == "" {
		return false
	}
	if ref == id || strings.TrimPrefix(ref, "sha256:") == strings.TrimPrefix(id, "sha256:") {
		return true
	}
	n := normalize(ref)
	for _, t := range r.tags {
		if t == ref || normalize(t) == n {
			return true
		}
	}
	for _, d := range r.digests {
		if d == ref || normalize(d) == n {
			return true
		}
	}
	return false
}

// normalize expands a short image name the way container runtimes do:
// "pause:3.9" is "docker.io/library/pause:3.9", a name without a tag or
// digest is ":latest".
func normalize(s string) string {
	if s == "" || strings.HasPrefix(s, "sha256:") {
		return s
	}
	name, digest, hasDigest := strings.Cut(s, "@")
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
	}
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !hasSlash {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	switch {
	case hasDigest && tag != "":
		return name + ":" + tag + "@" + digest
	case hasDigest:
		return name + "@" + digest
	case tag == "":
		return name + ":latest"
	}
	return name + ":" + tag
}

// DetectImages lists the images and those in use, records the images first
// seen now, marks those in use as used now, and forgets images that are
// gone. GarbageCollect and DeleteUnusedImages do it first; Run does it at
// once so that images' ages count from the agent's start.
func (m *Manager) DetectImages(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	_, err := m.detect(ctx, m.cfg.Clock.Now())
	return err
}

// detect returns the ids of the images in use.
func (m *Manager) detect(ctx context.Context, now time.Time) (map[string]bool, error) {
	images, err := m.cfg.Images.ListImages(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: ListImages: %w", ErrRuntime, err)
	}
	refs, err := m.cfg.InUse.ImagesInUse(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: listing the images in use: %w", ErrRuntime, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	inUse := make(map[string]bool)
	present := make(map[string]bool, len(images))
	for _, img := range images {
		id := img.GetId()
		if id == "" {
			continue
		}
		present[id] = true
		r, ok := m.records[id]
		if !ok {
			r = &record{firstDetected: now}
			m.records[id] = r
		}
		r.tags, r.digests = slices.Clone(img.GetRepoTags()), slices.Clone(img.GetRepoDigests())
		r.size, r.pinned = img.GetSize(), img.GetPinned()
		if m.cfg.SandboxImage != "" && r.matches(id, m.cfg.SandboxImage) {
			r.pinned = true
		}
		for _, ref := range refs {
			if r.matches(id, ref) {
				inUse[id] = true
				r.lastUsed = now
				break
			}
		}
	}
	for id := range m.records {
		if !present[id] {
			delete(m.records, id)
		}
	}
	return inUse, nil
}

type candidate struct {
	id string
	record
}

// candidates detects the images and returns those that may be removed
// (not in use, not pinned), least recently used first, ties broken by
// first detection.
func (m *Manager) candidates(ctx context.Context, now time.Time) ([]candidate, error) {
	inUse, err := m.detect(ctx, now)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	out := make([]candidate, 0, len(m.records))
	for id, r := range m.records {
		if inUse[id] || r.pinned {
			continue
		}
		out = append(out, candidate{id, *r})
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b candidate) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		if c := a.firstDetected.Compare(b.firstDetected); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	return out, nil
}

func (m *Manager) remove(ctx context.Context, c candidate, reason string) error {
	m.log.Info("removing image", zap.String("image", c.id), zap.Strings("tags", c.tags),
		zap.Uint64("size", c.size), zap.String("reason", reason))
	if err := m.cfg.Images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id}); err != nil {
		return fmt.Errorf("%w: RemoveImage %s: %w", ErrRuntime, c.id, err)
	}
	m.mu.Lock()
	delete(m.records, c.id)
	m.mu.Unlock()
	if m.removed != nil {
		m.removed.WithLabelValues(reason).Inc()
	}
	return nil
}

// freeSpace removes candidates in order until want bytes are freed,
// skipping images younger than MinAge; it returns the bytes freed and the
// candidates left.
func (m *Manager) freeSpace(ctx context.Context, want uint64, now time.Time, cs []candidate) (uint64, []candidate, error) {
	var freed uint64
	var errs []error
	var left []candidate
	for i, c := range cs {
		if freed >= want {
			left = append(left, cs[i:]...)
			break
		}
		if !c.lastUsed.Before(now) || now.Sub(c.firstDetected) < m.cfg.MinAge {
			left = append(left, c)
			continue
		}
		if err := m.remove(ctx, c, "space"); err != nil {
			errs = append(errs, err)
			left = append(left, c)
			continue
		}
		freed += c.size
	}
	return freed, left, errors.Join(errs...)
}

// GarbageCollect removes images not used for MaxAge (when set), then, when
// the image file system's usage is at or above HighThresholdPercent,
// removes unused images, least recently used first and none younger than
// MinAge, until usage is down to LowThresholdPercent. If it can't free
// enough it returns a *FreeSpaceError (errors.Is ErrNotEnoughFreed).
func (m *Manager) GarbageCollect(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	now := m.cfg.Clock.Now()
	cs, err := m.candidates(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	if m.cfg.MaxAge > 0 && now.Sub(m.began) > m.cfg.MaxAge {
		var keep []candidate
		for _, c := range cs {
			if now.Sub(c.lastUsed) <= m.cfg.MaxAge {
				keep = append(keep, c)
				continue
			}
			if err := m.remove(ctx, c, "age"); err != nil {
				errs = append(errs, err)
				keep = append(keep, c)
			}
		}
		cs = keep
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	capacity, available, err := m.cfg.FsStats(ctx)
	if err != nil {
		if errors.Is(err, ErrFsStats) || errors.Is(err, ErrRuntime) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrFsStats, err)
	}
	if capacity == 0 {
		return fmt.Errorf("%w: the image file system's capacity is 0", ErrFsStats)
	}
	available = min(available, capacity)
	usage := 100 - int(available*100/capacity)
	if usage < m.cfg.HighThresholdPercent {
		return nil
	}
	target := capacity / 100 * uint64(100-m.cfg.LowThresholdPercent)
	target += capacity % 100 * uint64(100-m.cfg.LowThresholdPercent) / 100
	if target <= available {
		return nil
	}
	need := target - available
	m.log.Info("image file system over the high threshold; freeing down to the low threshold",
		zap.Int("usagePercent", usage), zap.Int("high", m.cfg.HighThresholdPercent),
		zap.Int("low", m.cfg.LowThresholdPercent), zap.Uint64("bytesToFree", need))
	freed, _, err := m.freeSpace(ctx, need, now, cs)
	if err != nil {
		return err
	}
	if freed < need {
		return &FreeSpaceError{UsagePercent: usage, CapacityBytes: capacity, NeededBytes: need, FreedBytes: freed}
	}
	return nil
}

// DeleteUnusedImages removes every image that is not in use, not pinned
// and not younger than MinAge, whatever the disk usage: the eviction
// manager's node-level reclaim (it implements eviction.ImageGC).
func (m *Manager) DeleteUnusedImages(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	now := m.cfg.Clock.Now()
	cs, err := m.candidates(ctx, now)
	if err != nil {
		return err
	}
	m.log.Info("deleting unused images", zap.Int("candidates", len(cs)))
	_, _, err = m.freeSpace(ctx, math.MaxUint64, now, cs)
	return err
}

// Images returns what the manager knows of every image, ordered by id.
func (m *Manager) Images() []ImageRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ImageRecord, 0, len(m.records))
	for id, r := range m.records {
		out = append(out, ImageRecord{
			ID: id, Tags: slices.Clone(r.tags), FirstDetected: r.firstDetected, LastUsed: r.lastUsed,
			SizeBytes: r.size, Pinned: r.pinned,
		})
	}
	slices.SortFunc(out, func(a, b ImageRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Run detects the images at once, then calls GarbageCollect every Period
// until ctx is done; errors are logged. It returns nil once its
// loop has exited. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	if err := m.DetectImages(ctx); err != nil && ctx.Err() == nil {
		m.log.Info("detecting images failed", zap.Error(err))
	}
	for {
		t := m.cfg.Clock.NewTimer(m.cfg.Period)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		m.collect(ctx)
	}
}

// collect is one of Run's collections: a failure is logged, and a second
// failure in a row recorded as ImageGCFailed.
func (m *Manager) collect(ctx context.Context) {
	err := m.GarbageCollect(ctx)
	switch {
	case err == nil:
		m.failedBefore = false
	case ctx.Err() != nil:
	default:
		m.log.Warn("image garbage collection failed", zap.Error(err))
		if m.failedBefore {
			kubetypes.RecorderOrNop(m.cfg.Recorder).Event(kubetypes.NodeRef(m.cfg.NodeName), v1.EventTypeWarning, kubetypes.ReasonImageGCFailed, err.Error())
		}
		m.failedBefore = true
	}
}
