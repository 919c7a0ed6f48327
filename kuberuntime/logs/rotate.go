package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodekit/nodekit/lifecycle"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// RuntimeService is the part of the CRI a Manager uses.
type RuntimeService interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, containerID string) error
}

// Defaults of Config, the kubelet's.
const (
	DefaultMaxSize         = 10 << 20
	DefaultMaxFiles        = 5
	DefaultMonitorInterval = 10 * time.Second
	DefaultWorkers         = 1
)

// Config configures a Manager. Only Runtime is required.
type Config struct {
	Runtime RuntimeService
	// MaxSize is the size (bytes) at which a live log is rotated
	// (containerLogMaxSize). Default 10 MiB; negative turns rotation off.
	MaxSize int64
	// MaxFiles is how many files a container's log may have, the live one
	// included (containerLogMaxFiles); at least 2. Default 5.
	MaxFiles int
	// MonitorInterval is how often Run looks at the logs
	// (containerLogMonitorInterval). Default 10s.
	MonitorInterval time.Duration
	// Workers is how many containers are looked at in parallel
	// (containerLogMaxWorkers). Default 1.
	Workers int
	// CallTimeout bounds each CRI call. Default 30s.
	CallTimeout time.Duration
	Clock       clock.Clock // default real
	Logger      *zap.Logger // default nop
}

// Manager rotates the logs of the running containers, as the kubelet's
// ContainerLogManager.
type Manager struct {
	cfg      Config
	log      *zap.Logger
	once     lifecycle.Once
	mu       sync.Mutex // one pass at a time
	disabled atomic.Bool

	// Run compresses in a goroutine of its own, so that a slow
	// compression never holds up the size checks (RotateOnce compresses
	// inline). queue feeds it; inflight holds the files queued or being
	// compressed, whose .tmp a pass must not take for a leftover.
	async    bool
	queue    chan string
	inflight sync.Map
}

// New checks cfg and fills its defaults; it starts nothing.
func New(cfg Config) (*Manager, error) {
	var errs []error
	if cfg.Runtime == nil {
		errs = append(errs, fmt.Errorf("%w: Runtime is nil", ErrInvalidConfig))
	}
	if cfg.MaxSize == 0 {
		cfg.MaxSize = DefaultMaxSize
	}
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = DefaultMaxFiles
	}
	if cfg.MaxFiles < 2 {
		errs = append(errs, fmt.Errorf("%w: MaxFiles %d must be at least 2", ErrInvalidConfig, cfg.MaxFiles))
	}
	if cfg.MonitorInterval == 0 {
		cfg.MonitorInterval = DefaultMonitorInterval
	}
	if cfg.MonitorInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: MonitorInterval %v is negative", ErrInvalidConfig, cfg.MonitorInterval))
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Workers < 0 {
		errs = append(errs, fmt.Errorf("%w: Workers %d is negative", ErrInvalidConfig, cfg.Workers))
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: CallTimeout %v is negative", ErrInvalidConfig, cfg.CallTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Manager{cfg: cfg, log: cfg.Logger.Named("logrotate"), queue: make(chan string, 256)}, nil
}

// Disabled reports whether rotation is off: MaxSize is negative, or the
// runtime answered ReopenContainerLog with Unimplemented.
func (m *Manager) Disabled() bool { return m.cfg.MaxSize < 0 || m.disabled.Load() }

// Run calls RotateOnce every MonitorInterval until ctx ends, logging
// failures (a failed pass is tried again at the next interval). It
// follows the lifecycle contract: at most once, nil on a clean stop.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.once.Start(); err != nil {
		return err
	}
	m.log.Info("rotating container logs", zap.Int64("maxSize", m.cfg.MaxSize), zap.Int("maxFiles", m.cfg.MaxFiles),
		zap.Duration("interval", m.cfg.MonitorInterval), zap.Int("workers", m.cfg.Workers))
	var wg sync.WaitGroup
	defer wg.Wait()
	m.mu.Lock()
	m.async = true
	m.mu.Unlock()
	wg.Go(func() { m.compressor(ctx) })
	for {
		t := m.cfg.Clock.NewTimer(m.cfg.MonitorInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		if err := m.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("container log rotation failed", zap.Error(err))
		}
	}
}

// compressor compresses the queued rotated files until ctx ends.
func (m *Manager) compressor(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case src := <-m.queue:
			if err := compress(src); err != nil {
				m.log.Error("compressing a rotated container log failed", zap.String("file", src), zap.Error(err))
			}
			m.inflight.Delete(src)
		}
	}
}

// compressLater queues src for the compressor (Run) or compresses it now
// (RotateOnce called alone).
func (m *Manager) compressLater(src string) error {
	if !m.async {
		return compress(src)
	}
	if _, queued := m.inflight.LoadOrStore(src, true); queued {
		return nil
	}
	select {
	case m.queue <- src:
	default:
		m.inflight.Delete(src) // full: the next pass queues it again
	}
	return nil
}

// RotateOnce looks once at the log of every running container (Workers
// at a time) and returns when all are done: the leftovers of an
// interrupted pass are cleaned up, rotated files compressed, and a live
// log of MaxSize or more rotated (the oldest files deleted so that at
// most MaxFiles remain, the live one renamed <log>.<YYYYMMDD-hhmmss>, the
// runtime asked to reopen it). The errors of the containers are joined.
func (m *Manager) RotateOnce(ctx context.Context) error {
	if m.Disabled() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	containers, err := m.cfg.Runtime.ListContainers(cctx, &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	})
	cancel()
	if err != nil {
		return fmt.Errorf("logs: list containers: %w", err)
	}
	ids := make(chan string)
	var (
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
		workers = min(m.cfg.Workers, max(len(containers), 1))
	)
	for range workers {
		wg.Go(func() {
			for id := range ids {
				if err := m.rotateContainer(ctx, id); err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("container %s: %w", id, err))
					errMu.Unlock()
				}
			}
		})
	}
	for _, c := range containers {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || m.disabled.Load() || ctx.Err() != nil {
			continue
		}
		ids <- c.GetId()
	}
	close(ids)
	wg.Wait()
	return errors.Join(errs...)
}

func (m *Manager) rotateContainer(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	resp, err := m.cfg.Runtime.ContainerStatus(cctx, id, false)
	cancel()
	if status.Code(err) == codes.NotFound {
		return nil // gone since the listing
	}
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return nil
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("log path %q is not absolute", path)
	}
	files, err := m.cleanLeftovers(path)
	if err != nil {
		return err
	}

	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		// A pass that renamed the log but did not get to reopen it (a
		// crash): the runtime still writes to the rotated file.
		if err := m.reopen(ctx, id); err != nil {
			return fmt.Errorf("reopen missing log %s: %w", path, err)
		}
		fi, err = os.Stat(path)
	}
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}

	var rotated string
	if fi.Size() >= m.cfg.MaxSize {
		if files, err = m.removeExcess(path, files); err != nil {
			return err
		}
		if rotated, err = m.rotateLive(ctx, id, path); err != nil {
			return err
		}
	}
	// Compress after the rename, never before: compressing first lets the
	// live log grow meanwhile. The file just rotated is compressed at the
	// next pass, when the runtime surely writes to the new one.
	dir := filepath.Dir(path)
	for _, f := range files {
		if f.gz || f.tmp || f.name == rotated {
			continue
		}
		if err := m.compressLater(filepath.Join(dir, f.name)); err != nil {
			return err
		}
	}
	return nil
}

// cleanLeftovers removes what an interrupted compression left (a .tmp, the
// uncompressed twin of a finished .gz) and returns the usable rotated files.
func (m *Manager) cleanLeftovers(path string) ([]rotatedFile, error) {
	all, err := listRotated(path)
	if err != nil {
		return nil, err
	}
	keep := usable(all)
	if len(keep) == len(all) {
		return keep, nil
	}
	kept := make(map[string]bool, len(keep))
	for _, f := range keep {
		kept[f.name] = true
	}
	dir := filepath.Dir(path)
	for _, f := range all {
		if kept[f.name] {
			continue
		}
		// The .tmp of a file being compressed now, or the file itself
		// between the compressor's rename and its removal, is no leftover.
		src := strings.TrimSuffix(strings.TrimSuffix(filepath.Join(dir, f.name), tmpSuffix), gzSuffix)
		if _, busy := m.inflight.Load(src); busy {
			continue
		}
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("logs: remove leftover: %w", err)
		}
		m.log.Info("removed the leftover of an interrupted log rotation", zap.String("file", filepath.Join(dir, f.name)))
	}
	return keep, nil
}

// removeExcess deletes the oldest rotated files so that MaxFiles-2 remain:
// with the one about to be rotated and the live log, MaxFiles.
func (m *Manager) removeExcess(path string, files []rotatedFile) ([]rotatedFile, error) {
	n := len(files) - (m.cfg.MaxFiles - 2)
	if n <= 0 {
		return files, nil
	}
	dir := filepath.Dir(path)
	for _, f := range files[:n] {
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("logs: remove old log: %w", err)
		}
	}
	return files[n:], nil
}

// rotateLive renames the live log with the time and asks the runtime to
// reopen it; if it can't, the rename is undone. It returns the rotated
// file's base name ("" when it did not rotate).
func (m *Manager) rotateLive(ctx context.Context, id, path string) (string, error) {
	stamp := m.cfg.Clock.Now().Format(timestampFormat)
	rotated := path + "." + stamp
	for _, p := range []string{rotated, rotated + gzSuffix} {
		if _, err := os.Lstat(p); err == nil {
			// Rotated within the same second already: next pass.
			return "", nil
		}
	}
	if err := os.Rename(path, rotated); err != nil {
		return "", fmt.Errorf("logs: rotate: %w", err)
	}
	if err := m.reopen(ctx, id); err != nil {
		if rerr := os.Rename(rotated, path); rerr != nil {
			m.log.Error("renaming a rotated log back failed", zap.String("path", path), zap.Error(rerr))
			return "", errors.Join(err, fmt.Errorf("logs: rename back: %w", rerr))
		}
		return "", err
	}
	return filepath.Base(rotated), nil
}

// reopen asks the runtime to reopen a container's log. Unimplemented turns
// rotation off (a warning, once): renaming and renaming back every
// interval would only churn.
func (m *Manager) reopen(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.CallTimeout)
	err := m.cfg.Runtime.ReopenContainerLog(cctx, id)
	cancel()
	if err == nil {
		return nil
	}
	if status.Code(err) == codes.Unimplemented {
		if m.disabled.CompareAndSwap(false, true) {
			m.log.Warn("the runtime cannot reopen container logs: log rotation is off", zap.Error(err))
		}
		return fmt.Errorf("%w: %w", ErrReopenUnimplemented, err)
	}
	return fmt.Errorf("logs: reopen container log: %w", err)
}

// compress writes src.gz through src.tmp, then removes src. A crash
// leaves a .tmp (removed at the next pass, src compressed again) or both
// src and src.gz (src removed).
func compress(src string) error {
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("logs: compress: %w", err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("logs: compress: %w", err)
	}
	tmp := src + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("logs: compress: %w", err)
	}
	// The fastest level: a rotated log compresses about as well, and the
	// compression keeps up with a chatty container.
	zw, _ := gzip.NewWriterLevel(out, gzip.BestSpeed)
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close())
	if err == nil {
		err = out.Sync()
	}
	err = errors.Join(err, out.Close())
	if err == nil {
		err = os.Rename(tmp, src+gzSuffix)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("logs: compress %s: %w", src, err)
	}
	err = os.Remove(src)
	if errors.Is(err, os.ErrNotExist) {
		// Deleted as one too many while it was compressed: so is its copy.
		err = os.Remove(src + gzSuffix)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logs: compress: %w", err)
	}
	return nil
}
