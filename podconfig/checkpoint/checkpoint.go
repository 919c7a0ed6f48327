package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	ckpt "github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/podconfig"
)

// DefaultReplayAfter is how long Run waits for the live source before it
// replays the persisted set.
const DefaultReplayAfter = 5 * time.Second

// Config configures a Source.
type Config struct {
	// Dir holds the checkpoint file; created on the first write. Required.
	Dir string
	// Source is the name of the wrapped source. Forwarded and replayed
	// updates carry it, and it names the file ("podconfig-<Source>.json"),
	// so it must be a safe file name segment. Required.
	Source string
	// Out receives the source's updates (after they are persisted) and the
	// replayed set. Required.
	Out chan<- kubetypes.PodUpdate
	// ReplayAfter is how long Run waits for the live source's first update
	// before replaying the persisted set. Zero means DefaultReplayAfter; a
	// negative value replays as soon as Run starts.
	ReplayAfter time.Duration
	// Clock drives ReplayAfter. Default clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig.checkpoint".
	Logger *zap.Logger
	// FS is the file system used for the checkpoint. Default
	// internal/checkpoint.OS{}.
	FS ckpt.FS
}

// Source persists and forwards the updates of one wrapped source.
type Source struct {
	once        lifecycle.Once
	dir         string
	source      string
	file        string
	out         chan<- kubetypes.PodUpdate
	replayAfter time.Duration
	clock       clock.Clock
	log         *zap.Logger
	fs          ckpt.FS
	in          chan kubetypes.PodUpdate

	// lock is a one-slot semaphore (so waiting respects a context); it
	// guards the fields below and orders sends to Out.
	lock     chan struct{}
	live     bool      // the wrapped source has delivered
	replayed bool      // Replay has sent the persisted set
	current  []*v1.Pod // the wrapped source's set as last persisted
}

// New validates cfg and fills its defaults. It does no I/O.
func New(cfg Config) (*Source, error) {
	var errs []error
	if cfg.Dir == "" {
		errs = append(errs, fmt.Errorf("%w: Dir is required", ErrInvalidConfig))
	}
	if cfg.Source == "" {
		errs = append(errs, fmt.Errorf("%w: Source is required", ErrInvalidConfig))
	}
	file := "podconfig-" + cfg.Source + ".json"
	if err := ckpt.ValidateName(file); err != nil {
		errs = append(errs, fmt.Errorf("%w: Source %q cannot name a file: %w", ErrInvalidConfig, cfg.Source, err))
	}
	if cfg.Out == nil {
		errs = append(errs, fmt.Errorf("%w: Out is required", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s := &Source{
		dir:         cfg.Dir,
		source:      cfg.Source,
		file:        file,
		out:         cfg.Out,
		replayAfter: cfg.ReplayAfter,
		clock:       cfg.Clock,
		log:         cfg.Logger,
		fs:          cfg.FS,
		in:          make(chan kubetypes.PodUpdate),
		lock:        make(chan struct{}, 1),
	}
	if s.replayAfter == 0 {
		s.replayAfter = DefaultReplayAfter
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	s.log = s.log.Named("podconfig.checkpoint").With(zap.String("source", s.source))
	if s.fs == nil {
		s.fs = ckpt.OS{}
	}
	return s, nil
}

// In is the channel the wrapped source sends to. Run reads it.
func (s *Source) In() chan<- kubetypes.PodUpdate { return s.in }

// FileName is the checkpoint file's name inside Dir.
func (s *Source) FileName() string { return s.file }

func (s *Source) acquire(ctx context.Context) error {
	select {
	case s.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Source) release() { <-s.lock }

// Handle persists the pod set that results from u and forwards u to Out
// (with Source set to Config.Source), waiting for ctx. A SET replaces the
// persisted set; ADD, UPDATE, DELETE and RECONCILE add or replace pods by
// UID; REMOVE drops them. A failed write is logged and returned (wrapping
// ErrPersist) but u is forwarded anyway: live data goes first. From the
// first call on, Replay does nothing.
func (s *Source) Handle(ctx context.Context, u kubetypes.PodUpdate) error {
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	next := applyUpdate(s.current, u)
	var perr error
	if err := s.persist(next); err != nil {
		perr = fmt.Errorf("%w: %w", ErrPersist, err)
		s.log.Warn("cannot persist pods; forwarding them anyway", zap.Error(err))
	}
	u.Source = s.source
	select {
	case s.out <- u:
	case <-ctx.Done():
		return errors.Join(ctx.Err(), perr)
	}
	s.live = true
	s.current = next
	return perr
}

func applyUpdate(cur []*v1.Pod, u kubetypes.PodUpdate) []*v1.Pod {
	if u.Op == kubetypes.SET {
		return append([]*v1.Pod(nil), u.Pods...)
	}
	touched := make(map[string]*v1.Pod, len(u.Pods))
	for _, p := range u.Pods {
		if p != nil {
			touched[string(p.UID)] = p
		}
	}
	next := make([]*v1.Pod, 0, len(cur)+len(u.Pods))
	for _, p := range cur {
		if np, ok := touched[string(p.UID)]; ok {
			delete(touched, string(p.UID))
			if u.Op == kubetypes.REMOVE {
				continue
			}
			p = np
		}
		next = append(next, p)
	}
	if u.Op != kubetypes.REMOVE {
		for _, p := range u.Pods { // keep the update's order for new pods
			if p != nil && touched[string(p.UID)] == p {
				next = append(next, p)
			}
		}
	}
	return next
}

func (s *Source) persist(pods []*v1.Pod) error {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		if p != nil {
			list.Items = append(list.Items, *p)
		}
	}
	data, err := json.Marshal(&list)
	if err != nil {
		return err
	}
	// Keep the set being replaced as the previous generation, the fallback
	// when the latest is found corrupt. A crash right after this rename
	// leaves only the previous generation, which load then uses.
	if _, err := s.fs.Lstat(filepath.Join(s.dir, s.file)); err == nil {
		if err := s.fs.Rename(filepath.Join(s.dir, s.file), filepath.Join(s.dir, s.prevFile())); err != nil {
			s.log.Debug("cannot keep the previous persisted set", zap.Error(err))
		}
	}
	return ckpt.WriteFS(s.fs, s.dir, s.file, data)
}

// prevFile is the previous generation's name ("<FileName>.prev").
func (s *Source) prevFile() string { return s.file + ".prev" }

// Replay sends the persisted set to Out as a SET, unless the wrapped
// source has delivered already or Replay has replayed before; it reports
// whether it sent. A missing file sends nothing. A corrupt file (bad
// checksum, truncated, not a PodList) is set aside as .corrupt and logged;
// then the previous set (FileName()+".prev", kept by every write) is sent
// if it is usable, else nothing: the source starts empty. Other read
// errors are returned.
func (s *Source) Replay(ctx context.Context) (bool, error) {
	if err := s.acquire(ctx); err != nil {
		return false, err
	}
	defer s.release()
	if s.live || s.replayed {
		return false, nil
	}
	pods, err := s.load()
	if err != nil {
		return false, err
	}
	if pods == nil {
		return false, nil
	}
	select {
	case s.out <- kubetypes.PodUpdate{Pods: pods, Op: kubetypes.SET, Source: s.source}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	s.replayed = true
	s.log.Info("replayed persisted pods", zap.Int("pods", len(pods)))
	return true, nil
}

// load reads the persisted set; nil, nil when there is none usable. A
// missing or corrupt latest generation falls back to the previous one
// (one update older), and says so.
func (s *Source) load() ([]*v1.Pod, error) {
	s.removeLeftovers()
	pods, found, err := s.loadFile(s.file)
	if err != nil || pods != nil {
		return pods, err
	}
	prev, prevFound, err := s.loadFile(s.prevFile())
	switch {
	case err != nil:
		return nil, err
	case prev != nil:
		s.log.Warn("the latest persisted pods are unusable: replaying the previous set (one update older)",
			zap.Bool("latest_missing", !found), zap.Int("pods", len(prev)))
		return prev, nil
	case found || prevFound:
		s.log.Warn("no usable persisted pods: starting empty")
	default:
		s.log.Info("no persisted pods to replay")
	}
	return nil, nil
}

// loadFile reads one generation. pods is non-nil when it is usable; found
// reports whether the file was there (corrupt ones are set aside).
func (s *Source) loadFile(name string) (pods []*v1.Pod, found bool, err error) {
	data, err := ckpt.ReadFS(s.fs, s.dir, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case errors.Is(err, ckpt.ErrCorrupt) || errors.Is(err, ckpt.ErrTooLarge):
		s.setAside(name, err)
		return nil, true, nil
	case err != nil:
		return nil, true, err
	}
	// A matching checksum proves integrity, not sanity: the pods are
	// checked with the bounds of live input before they are decoded.
	pods, err = podconfig.DecodePodList(data)
	if err != nil {
		s.setAside(name, err)
		return nil, true, nil
	}
	return pods, true, nil
}

// removeLeftovers removes the temporary files of writes a crash
// interrupted (".<file>.tmp-*"); the complete file is never among them.
func (s *Source) removeLeftovers() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	prefix := "." + s.file + ".tmp-"
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := s.fs.Remove(filepath.Join(s.dir, e.Name())); err != nil {
			s.log.Warn("cannot remove the leftover of an interrupted write", zap.String("file", e.Name()), zap.Error(err))
			continue
		}
		s.log.Info("removed the leftover of an interrupted write", zap.String("file", e.Name()))
	}
}

func (s *Source) setAside(name string, cause error) {
	moved, err := ckpt.SetAsideFS(s.fs, s.dir, name)
	if err != nil {
		s.log.Error("corrupt persisted pods could not be set aside; ignoring them", zap.String("file", name), zap.NamedError("cause", cause), zap.Error(err))
		return
	}
	s.log.Warn("corrupt persisted pods set aside", zap.String("file", name), zap.NamedError("cause", cause), zap.String("moved_to", moved))
}

// Run forwards what the wrapped source sends to In (see Handle) until ctx
// is done, and replays the persisted set once ReplayAfter has passed
// without a live update (at once if ReplayAfter is negative). Errors are
// logged. It returns nil after ctx is done.
// See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (s *Source) Run(ctx context.Context) error {
	if err := s.once.Start(); err != nil {
		return err
	}
	var replayC <-chan time.Time
	if s.replayAfter < 0 {
		s.replay(ctx)
	} else {
		t := s.clock.NewTimer(s.replayAfter)
		defer t.Stop()
		replayC = t.C()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-s.in:
			if err := s.Handle(ctx, u); err != nil && ctx.Err() == nil {
				s.log.Warn("update handled with an error", zap.Error(err))
			}
		case <-replayC:
			replayC = nil
			s.replay(ctx)
		}
	}
}

func (s *Source) replay(ctx context.Context) {
	if _, err := s.Replay(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("cannot replay persisted pods", zap.Error(err))
	}
}
