package podconfig

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/internal/fsutil"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// DefaultFilePeriod is how often a file source re-reads its path when
// FileSourceConfig.Period is 0 (the kubelet's).
const DefaultFilePeriod = 20 * time.Second

// FileSourceConfig configures a FileSource.
type FileSourceConfig struct {
	// Path is a manifest file or a directory of manifests (not recursive;
	// names starting with '.' are ignored; files are read in name order).
	Path string
	// NodeName is the node the static pods run on.
	NodeName string
	// Period between full re-reads; default DefaultFilePeriod. File system
	// notifications make most changes show up sooner.
	Period time.Duration
	// Clock drives the period. Default clock.RealClock{}.
	Clock clock.WithTicker
	// Logger; default zap.NewNop(). Named "podconfig.file".
	Logger *zap.Logger
	// Out receives a SET (Source SourceFile) with all the pods whenever they
	// change, typically PodConfig.Channel(SourceFile). Required. A pod
	// whose manifest did not change is sent again as the same object: the
	// receiver must not modify the pods (PodConfig does not).
	Out chan<- kubetypes.PodUpdate
	// OnError, if set, is called with every manifest that fails to decode
	// (the error names the file and the line or field). It is called from
	// Sync or Run's goroutine, once per distinct broken content.
	OnError func(path string, err error)
}

// FileSource reads static pod manifests from a file or a directory.
//
// Rules: a missing path gives an empty SET (so the source counts as seen); a
// manifest that stops parsing keeps the pods of its last good version (a
// half-written file never stops a running pod); a manifest that never parsed
// contributes no pods; when Path is a single file that has never parsed,
// nothing is sent at all; unchanged contents (by SHA-256 per file) are not
// decoded again and an unchanged pod set is not sent again.
type FileSource struct {
	cfg FileSourceConfig
	log *zap.Logger

	mu    sync.Mutex // serializes scans
	files map[string]*fileState
	sent  bool
	dirty bool
	once  lifecycle.Once
	reads int // files read (tests)

	// hold is set while Run reads files named by file system events: a
	// manifest that fails to decode then is not reported at once but read
	// again recheckDelay later (held), since an event can arrive between a
	// writer's truncate and its write (os.WriteFile in place). Only the
	// recheck, or a periodic full read, reports it.
	hold bool
	held map[string]struct{}
}

// recheckDelay is how long after an event a manifest that failed to decode
// is read again before the failure is reported.
const recheckDelay = 250 * time.Millisecond

type fileState struct {
	// stamp is the file's metadata when it was last read, if it was old
	// enough to be trusted (see racyWindow); zero otherwise.
	stamp  fsutil.Stamp
	sum    [32]byte
	pods   []*v1.Pod // last good version; nil if it never parsed
	good   bool      // pods came from a successful decode
	errMsg string    // the error of the current content, if any
}

// NewFileSource validates cfg. It does no I/O.
func NewFileSource(cfg FileSourceConfig) (*FileSource, error) {
	var bad problems
	if cfg.Path == "" {
		bad.add("Path: empty")
	}
	if cfg.NodeName == "" {
		bad.add("NodeName: empty")
	}
	if cfg.Out == nil {
		bad.add("Out: nil channel")
	}
	if cfg.Period < 0 {
		bad.add("Period: %v is negative", cfg.Period)
	}
	if err := bad.err(); err != nil {
		return nil, err
	}
	if cfg.Period == 0 {
		cfg.Period = DefaultFilePeriod
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &FileSource{cfg: cfg, log: cfg.Logger.Named("podconfig.file"), files: make(map[string]*fileState), held: make(map[string]struct{})}, nil
}

// Sync reads Path once and sends a SET on Out if the pods changed since the
// last send (the first Sync always sends, unless Path is a single file that
// does not parse). It blocks until Out takes the update or ctx is done.
// Every file is read.
func (s *FileSource) Sync(ctx context.Context) error {
	return s.sync(ctx, true, false)
}

// racyWindow is how old a file's last change (mtime and ctime) must be,
// when it is read, for its metadata to vouch for its content later: file
// times come from a coarse kernel clock, so a file rewritten with the same
// size just after it was read can keep the same times. A file changed
// within the window is read again by the next scan (git's "racily clean"
// entries, the same way).
const racyWindow = 100 * time.Millisecond

// vouching returns st if it was taken at least racyWindow after the file's
// last change (so it vouches for the content read now), else the zero
// stamp, which matches no file.
func vouching(st fsutil.Stamp, now time.Time) fsutil.Stamp {
	if st.Trusted(now, racyWindow) {
		return st
	}
	return fsutil.Stamp{}
}

// sync is Sync; with full false (a scan for file system events) a file
// whose size, times, inode and device are those of its last read, which was
// more than racyWindow after its last change, is not read again.
func (s *FileSource) sync(ctx context.Context, full, hold bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = hold
	pods, send, err := s.scanLocked(full)
	s.hold = false
	if err != nil {
		return err
	}
	if !send {
		return nil
	}
	return s.sendLocked(ctx, pods)
}

// sendLocked sends pods as the source's SET.
func (s *FileSource) sendLocked(ctx context.Context, pods []*v1.Pod) error {
	select {
	case s.cfg.Out <- kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceFile, Pods: pods}:
		s.sent = true
		s.dirty = false
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scanLocked reads the path and returns the pods to send and whether to
// send them.
func (s *FileSource) scanLocked(full bool) ([]*v1.Pod, bool, error) {
	info, err := os.Stat(s.cfg.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(s.files) > 0 {
			s.files = make(map[string]*fileState)
			s.dirty = true
		}
		return []*v1.Pod{}, !s.sent || s.dirty, nil
	case err != nil:
		return nil, false, fmt.Errorf("podconfig: file source: %w", err)
	}

	var names []string
	var stamps []fsutil.Stamp
	single := !info.IsDir()
	if single {
		names = []string{s.cfg.Path}
		stamps = []fsutil.Stamp{fsutil.StampOf(info)}
	} else {
		entries, err := os.ReadDir(s.cfg.Path)
		if err != nil {
			return nil, false, fmt.Errorf("podconfig: file source: %w", err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(s.cfg.Path, e.Name())
			fi, err := os.Stat(p) // follows symlinks
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			names = append(names, p) // ReadDir returns them sorted
			stamps = append(stamps, fsutil.StampOf(fi))
		}
	}

	now := s.cfg.Clock.Now()
	present := make(map[string]bool, len(names))
	for i, name := range names {
		stamp := stamps[i]
		// A stored stamp is zero unless it was trusted when read; a listed
		// one never is.
		if st := s.files[name]; !full && st != nil && st.stamp == stamp {
			present[name] = true // unchanged since it was read
			continue
		}
		// A file removed between the listing and the read is gone, not
		// broken: its pods go with it.
		present[name] = !s.readFileLocked(name, vouching(stamp, now))
	}
	for name := range s.files {
		if !present[name] {
			delete(s.files, name)
			s.dirty = true
		}
	}
	if single {
		if !present[s.cfg.Path] {
			return []*v1.Pod{}, !s.sent || s.dirty, nil
		}
		if st := s.files[s.cfg.Path]; st == nil || !st.good {
			return nil, false, nil
		}
	}
	pods, send := s.setLocked()
	return pods, send, nil
}

// setLocked returns the pods of every file, in file name order, and
// whether to send them (nothing was sent yet, or the files changed since).
func (s *FileSource) setLocked() ([]*v1.Pod, bool) {
	if s.sent && !s.dirty {
		return nil, false
	}
	names := make([]string, 0, len(s.files))
	for name := range s.files {
		names = append(names, name)
	}
	slices.Sort(names)
	pods := []*v1.Pod{}
	for _, name := range names {
		pods = append(pods, s.files[name].pods...)
	}
	return pods, true
}

// syncNamed is sync for file system events under a watched directory
// Path: only the files the events named are looked at, and each that
// exists is read (an event says it changed; its metadata may not, on a
// file system with coarse times). A burst of N manifests renamed in costs
// N reads, not a scan of the directory per batch of events.
//
// With hold, a manifest that fails to decode is held for a recheck rather
// than reported (see FileSource.hold).
func (s *FileSource) syncNamed(ctx context.Context, names map[string]struct{}, hold bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = hold
	defer func() { s.hold = false }()
	now := s.cfg.Clock.Now()
	for name := range names {
		fi, err := os.Stat(name) // follows symlinks
		if err == nil && fi.Mode().IsRegular() {
			if !s.readFileLocked(name, vouching(fsutil.StampOf(fi), now)) {
				continue
			}
		}
		if _, ok := s.files[name]; ok {
			delete(s.files, name)
			s.dirty = true
		}
	}
	pods, send := s.setLocked()
	if !send {
		return nil
	}
	return s.sendLocked(ctx, pods)
}

// readFileLocked reads one manifest and updates its state. It reports
// whether the file turned out to be gone (removed since it was listed).
// stamp (zero: none to keep) is the file's metadata as listed before the
// read: a change after the listing gives the next scan other metadata, so
// it reads the file again.
func (s *FileSource) readFileLocked(name string, stamp fsutil.Stamp) (gone bool) {
	s.reads++
	data, err := readLimited(name)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	st := s.files[name]
	if st == nil {
		st = &fileState{}
		s.files[name] = st
		s.dirty = true // a new file, even a broken one, changes the set of files
	}
	st.stamp = stamp
	if err != nil {
		s.failLocked(name, st, err)
		return false
	}
	sum := sha256.Sum256(data)
	if st.sum == sum && (st.good || st.errMsg != "") {
		return false // same bytes: same outcome as last time
	}
	st.sum = sum
	pods, err := DecodeStaticPods(data, StaticPodOptions{
		NodeName: s.cfg.NodeName, Source: kubetypes.SourceFile, Origin: name, AddNoExecuteToleration: true,
	})
	if err != nil {
		s.failLocked(name, st, err)
		return false
	}
	st.pods, st.good, st.errMsg = pods, true, ""
	s.dirty = true
	return false
}

// failLocked reports a manifest that failed to read or decode, or holds it
// for a recheck while reading for events (see hold).
func (s *FileSource) failLocked(name string, st *fileState, err error) {
	if s.hold {
		s.held[name] = struct{}{}
		// Read and decode it again next time, whatever its metadata.
		st.sum, st.stamp = [32]byte{}, fsutil.Stamp{}
		return
	}
	s.reportLocked(name, st, err)
}

// recheck reads the held manifests again and reports those that still
// fail.
func (s *FileSource) recheck(ctx context.Context) error {
	s.mu.Lock()
	names := s.held
	s.held = make(map[string]struct{})
	s.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	return s.syncNamed(ctx, names, false)
}

func (s *FileSource) reportLocked(name string, st *fileState, err error) {
	if st.errMsg == err.Error() {
		return
	}
	st.errMsg = err.Error()
	if st.good {
		s.log.Warn("manifest no longer parses; keeping its last good version", zap.String("file", name), zap.Error(err))
	} else {
		s.log.Warn("manifest does not parse; ignoring it", zap.String("file", name), zap.Error(err))
	}
	if s.cfg.OnError != nil {
		s.cfg.OnError(name, err)
	}
}

func readLimited(name string) ([]byte, error) {
	data, err := fsutil.ReadAtMost(name, MaxManifestSize+1)
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %s: %w: more than %d bytes", ErrInvalidManifest, name, ErrTooLarge, MaxManifestSize)
	}
	return data, nil
}

// Run syncs at once, then again on every file system event under Path and
// every Period. Events under a directory Path read just the manifests they
// name (each once per batch of queued events); events on Path itself, or
// under the parent of a file Path, rescan Path, re-reading only files whose
// metadata moved. If watching fails (or the watcher reports an error, or a
// watched directory Path is removed), it keeps polling every Period and
// tries to watch again each time. Errors from a sync are logged, not
// returned. Run returns nil once ctx is done
// and its goroutine (the watcher) is closed.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (s *FileSource) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}

	ticker := s.cfg.Clock.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	var w *fsnotify.Watcher
	var watchingPath bool // w watches Path, a directory (else Path's parent)
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	sync := func(full bool) {
		if err := s.sync(ctx, full, !full); err != nil && ctx.Err() == nil {
			s.log.Warn("reading static pod manifests failed", zap.String("path", s.cfg.Path), zap.Error(err))
		}
	}
	watch := func() {
		if w != nil {
			return
		}
		nw, isPath, err := s.newWatcher()
		if err != nil {
			s.log.Debug("cannot watch; polling", zap.String("path", s.cfg.Path), zap.Error(err))
			return
		}
		w, watchingPath = nw, isPath
	}
	// recheck reads held manifests again recheckDelay after the events
	// that held them (see FileSource.hold).
	var recheck clock.Timer
	defer func() {
		if recheck != nil {
			recheck.Stop()
		}
	}()
	armRecheck := func() {
		s.mu.Lock()
		pending := len(s.held) > 0
		s.mu.Unlock()
		if pending && recheck == nil {
			recheck = s.cfg.Clock.NewTimer(recheckDelay)
		}
	}
	watch()
	sync(true)
	for {
		var events chan fsnotify.Event
		var errs chan error
		if w != nil {
			events, errs = w.Events, w.Errors
		}
		var recheckC <-chan time.Time
		if recheck != nil {
			recheckC = recheck.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-recheckC:
			recheck = nil
			if err := s.recheck(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading static pod manifests failed", zap.String("path", s.cfg.Path), zap.Error(err))
			}
		case <-ticker.C():
			watch()
			sync(true) // every Period, every file is read
		case ev, ok := <-events:
			if !ok {
				_ = w.Close()
				w = nil
				continue
			}
			// One pass covers every event already queued: files written
			// in a burst (N manifests renamed in at once) are each read
			// once, not the whole directory per event.
			batch, closed := drainEvents(events, ev)
			named, scan, lost := s.eventTargets(batch, watchingPath)
			switch {
			case scan:
				sync(false)
			case len(named) > 0:
				if err := s.syncNamed(ctx, named, true); err != nil && ctx.Err() == nil {
					s.log.Warn("reading static pod manifests failed", zap.String("path", s.cfg.Path), zap.Error(err))
				}
			}
			armRecheck()
			if closed || lost {
				// The watched directory went (or the watcher did):
				// poll, and watch again at the next period.
				_ = w.Close()
				w = nil
			}
		case err, ok := <-errs:
			if ok {
				s.log.Warn("file watcher failed; polling", zap.String("path", s.cfg.Path), zap.Error(err))
			}
			_ = w.Close()
			w = nil
		}
	}
}

// eventTargets says what a batch of file system events asks for. When the
// watcher watches Path (a directory), named holds the manifests the events
// name (direct children of Path, not hidden), and scan is set by an event
// on Path itself; lost is set when Path was removed or renamed (its watch
// is gone). Otherwise (Path is a file, or missing, and its parent is
// watched) any event not on a hidden name asks for a scan.
func (s *FileSource) eventTargets(batch []fsnotify.Event, watchingPath bool) (named map[string]struct{}, scan, lost bool) {
	path := filepath.Clean(s.cfg.Path)
	for _, ev := range batch {
		clean := filepath.Clean(ev.Name)
		if clean == path {
			scan = true
			lost = lost || (watchingPath && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0)
			continue
		}
		if strings.HasPrefix(filepath.Base(clean), ".") {
			continue
		}
		if !watchingPath {
			scan = true
			continue
		}
		if filepath.Dir(clean) != path {
			continue
		}
		if named == nil {
			named = make(map[string]struct{}, len(batch))
		}
		named[filepath.Join(s.cfg.Path, filepath.Base(clean))] = struct{}{}
	}
	return named, scan, lost
}

// drainEvents returns first and the events queued after it on ch, taken
// without blocking, and whether ch was closed.
func drainEvents(ch <-chan fsnotify.Event, first fsnotify.Event) (batch []fsnotify.Event, closed bool) {
	batch = append(batch, first)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return batch, true
			}
			batch = append(batch, ev)
		default:
			return batch, false
		}
	}
}

// newWatcher watches Path when it is a directory (isPath), else the
// directory holding it (so a file replaced by rename is seen).
func (s *FileSource) newWatcher() (w *fsnotify.Watcher, isPath bool, err error) {
	dir, isPath := s.cfg.Path, true
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		dir, isPath = filepath.Dir(dir), false
	}
	w, err = fsnotify.NewWatcher()
	if err != nil {
		return nil, false, err
	}
	if err := w.Add(dir); err != nil {
		_ = w.Close()
		return nil, false, err
	}
	return w, isPath, nil
}
