package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

// ReaderConfig configures a Reader. Every field is optional.
type ReaderConfig struct {
	// PollInterval is how often a follower looks for more output or a
	// rotation at the end of the log. Default 250ms.
	PollInterval time.Duration
	// AliveInterval is how often a follower at the end of the log asks
	// whether the container still runs. Default 1s.
	AliveInterval time.Duration
	Clock         clock.Clock // default real
	Logger        *zap.Logger // default nop
}

// Reader reads container logs in the CRI log format, across the rotated
// (and compressed) files of a rotation set. It holds no state between
// reads: one Reader serves any number of concurrent reads.
type Reader struct {
	cfg ReaderConfig
	log *zap.Logger
}

// NewReader checks cfg and fills its defaults.
func NewReader(cfg ReaderConfig) (*Reader, error) {
	if cfg.PollInterval < 0 {
		return nil, fmt.Errorf("%w: PollInterval %v is negative", ErrInvalidConfig, cfg.PollInterval)
	}
	if cfg.AliveInterval < 0 {
		return nil, fmt.Errorf("%w: AliveInterval %v is negative", ErrInvalidConfig, cfg.AliveInterval)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 250 * time.Millisecond
	}
	if cfg.AliveInterval == 0 {
		cfg.AliveInterval = time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Reader{cfg: cfg, log: cfg.Logger.Named("logs")}, nil
}

// AliveFunc reports whether the container writing a log still runs; a
// follower stops at the end of the log once it says false.
type AliveFunc func(ctx context.Context) (bool, error)

// source is one file of the output, in order.
type source struct {
	path  string
	gz    bool
	off   int64 // plain: where to start
	skip  int64 // gz: lines to skip first
	stamp string
}

type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) fileID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{uint64(st.Dev), st.Ino}
	}
	return fileID{}
}

// ReadLogs writes the log of the container whose live log file is path to
// stdout and stderr (a nil writer skips that stream; tail lines then count
// only the other), as opts says: the rotated files first, oldest first,
// then path. With opts.Follow it keeps reading what is written, across
// rotations, until alive says the container stopped (nil alive: stop at
// the end) or ctx ends (ctx's error is returned). It returns nil when the
// byte limit is reached, and a writer's error as it is.
func (r *Reader) ReadLogs(ctx context.Context, path string, opts Options, alive AliveFunc, stdout, stderr io.Writer) error {
	if err := opts.validate(); err != nil {
		return err
	}
	if path == "" || !filepath.IsAbs(path) {
		return fmt.Errorf("%w: log path %q is not absolute", ErrInvalidOptions, path)
	}
	e := newEmitter(opts, stdout, stderr)
	err := r.read(ctx, path, opts, alive, e)
	if e.bad > 0 {
		r.log.Debug("skipped lines not in the CRI log format", zap.String("path", path), zap.Int("lines", e.bad))
	}
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

func (r *Reader) read(ctx context.Context, path string, opts Options, alive AliveFunc, e *emitter) error {
	// The live file first, so a rotation between this and the listing
	// shows as the same file listed twice (skipped below), not as a gap.
	cur, err := os.Open(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("logs: %w", err)
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	var curSize int64
	var curID fileID
	if cur != nil {
		fi, err := cur.Stat()
		if err != nil {
			return fmt.Errorf("logs: %w", err)
		}
		curSize, curID = fi.Size(), idOf(fi)
	}
	files, err := Files(path)
	if err != nil {
		return err
	}
	var older []source
	lastStamp := "" // the newest rotation older than the live file
	base := filepath.Base(path)
	for _, p := range files[:len(files)-1] {
		s := source{path: p, gz: filepath.Ext(p) == gzSuffix}
		if !s.gz {
			if fi, err := os.Stat(p); err == nil && cur != nil && idOf(fi) == curID {
				continue
			}
		}
		if f, ok := parseRotated(base, filepath.Base(p)); ok {
			s.stamp = f.stamp
			lastStamp = max(lastStamp, f.stamp)
		}
		older = append(older, s)
	}

	sel := e.selected()
	first := 0 // the first of older to read
	curOff := int64(0)
	if opts.TailLines >= 0 {
		var found int64
		if cur != nil {
			if curOff, found, err = tailStart(cur, curSize, opts.TailLines, sel); err != nil {
				return err
			}
		}
		first = len(older)
		if found < opts.TailLines {
			if first, err = r.tailOlder(older, opts.TailLines-found, sel); err != nil {
				return err
			}
		}
	}
	for _, s := range older[first:] {
		if err := r.readSource(ctx, s, e); err != nil {
			return err
		}
	}
	if cur != nil {
		if _, err := cur.Seek(curOff, io.SeekStart); err != nil {
			return fmt.Errorf("logs: %w", err)
		}
	}
	lr := &liveReader{r: r, path: path, cur: cur, curID: curID, lastStamp: lastStamp, alive: alive, e: e}
	defer func() { cur = lr.cur }()
	return lr.run(ctx, opts.Follow)
}

// tailOlder picks where in the older files a tail of need (> 0) lines
// starts: the index of the first file to read, its start set in place.
func (r *Reader) tailOlder(older []source, need int64, sel [2]bool) (int, error) {
	for i := len(older) - 1; i >= 0; i-- {
		s := &older[i]
		if !s.gz {
			off, found, err := tailPlain(s.path, need, sel)
			if errors.Is(err, os.ErrNotExist) {
				// Compressed since it was listed: count the compressed one.
				s.path, s.gz = s.path+gzSuffix, true
			} else if err != nil {
				return 0, err
			} else {
				if found == need {
					s.off = off
					return i, nil
				}
				need -= found
				continue
			}
		}
		n, err := r.countGz(s.path, sel)
		if err != nil {
			return 0, err
		}
		if n >= need {
			s.skip = n - need
			return i, nil
		}
		need -= n
	}
	return 0, nil
}

// tailPlain is tailStart on the file at path.
func tailPlain(path string, need int64, sel [2]bool) (int64, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("logs: %w", err)
	}
	return tailStart(f, fi.Size(), need, sel)
}

func (r *Reader) countGz(path string, sel [2]bool) (int64, error) {
	f, err := openGzip(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // removed as the oldest since it was listed
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return countLines(f, sel)
}

// readSource writes one older (no longer written) file.
func (r *Reader) readSource(ctx context.Context, s source, e *emitter) error {
	var rc io.ReadCloser
	var err error
	if s.gz {
		rc, err = openGzip(s.path)
	} else {
		var f *os.File
		f, err = os.Open(s.path)
		if errors.Is(err, os.ErrNotExist) {
			// Compressed since it was listed: the same content (from its
			// start: a tail may get a few lines more in this race).
			return r.readSource(ctx, source{path: s.path + gzSuffix, gz: true}, e)
		}
		if err == nil {
			if _, err = f.Seek(s.off, io.SeekStart); err != nil {
				f.Close()
			}
		}
		rc = f
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil // deleted as the oldest meanwhile
	}
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	defer rc.Close()
	rr := newRecordReader(rc)
	if s.skip > 0 {
		if err := skipLines(rr, s.skip, e.selected()); err != nil {
			return err
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, err := rr.next()
		if errors.Is(err, io.EOF) {
			if rec := rr.rest(); rec != nil {
				return e.record(rec)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if err := e.record(rec); err != nil {
			return err
		}
	}
}

// liveReader reads the live file and, following, the files that take
// its place.
type liveReader struct {
	r         *Reader
	path      string
	cur       *os.File
	curID     fileID
	rr        *recordReader
	lastStamp string // the newest rotated file read or known older
	alive     AliveFunc
	e         *emitter
}

// drain writes the complete records that can be read now; grew reports
// whether there were any bytes.
func (l *liveReader) drain() (grew bool, err error) {
	if l.rr == nil {
		return false, nil
	}
	for {
		rec, err := l.rr.next()
		if errors.Is(err, io.EOF) {
			return grew || len(l.rr.pending) > 0, nil
		}
		if err != nil {
			return grew, err
		}
		grew = true
		if err := l.e.record(rec); err != nil {
			return grew, err
		}
	}
}

// finish drains and writes an incomplete last record as it is.
func (l *liveReader) finish() error {
	if _, err := l.drain(); err != nil {
		return err
	}
	if l.rr != nil {
		if rec := l.rr.rest(); rec != nil {
			return l.e.record(rec)
		}
	}
	return nil
}

// maxQuietWaits bounds how many polls a follower waits for a rotated
// file to stop growing (the runtime may still write what it had
// buffered) before it moves to the new file.
const maxQuietWaits = 4

func (l *liveReader) run(ctx context.Context, follow bool) error {
	if l.cur != nil {
		l.rr = newRecordReader(l.cur)
	}
	if !follow {
		return l.finish()
	}
	clk := l.r.cfg.Clock
	var lastAlive time.Time
	stopping := false
	waits := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		grew, err := l.drain()
		if err != nil {
			return err
		}
		// A new file at the path: the one read was rotated. Move on once
		// it has stopped growing.
		if fi, err := os.Stat(l.path); err == nil && (l.cur == nil || idOf(fi) != l.curID) {
			if grew && waits < maxQuietWaits {
				waits++
			} else {
				waits = 0
				if err := l.next(ctx); err != nil {
					return err
				}
				continue
			}
		}
		if stopping {
			return l.finish()
		}
		if now := clk.Now(); lastAlive.IsZero() || now.Sub(lastAlive) >= l.r.cfg.AliveInterval {
			lastAlive = now
			running := false
			if l.alive != nil {
				ok, err := l.alive(ctx)
				if err != nil {
					return fmt.Errorf("logs: container state: %w", err)
				}
				running = ok
			}
			if !running {
				// One more pass: what was written before the exit.
				stopping = true
				continue
			}
		}
		t := clk.NewTimer(l.r.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
	}
}

// next finishes the rotated file, opens the new live file, and writes the
// files rotated in between (a follower slower than the rotations), so no
// rotation is skipped while the files are kept.
func (l *liveReader) next(ctx context.Context) error {
	if err := l.finish(); err != nil {
		return err
	}
	f, err := os.Open(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil // rotated again: next poll
	}
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("logs: %w", err)
	}
	old, oldID := l.cur, l.curID
	l.cur, l.curID = f, idOf(fi)
	if old != nil {
		old.Close()
	}
	if l.rr == nil {
		l.rr = newRecordReader(f)
	} else {
		l.rr.reset(f)
	}
	all, err := listRotated(l.path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(l.path)
	var between []rotatedFile
	for _, rf := range usable(all) {
		if rf.stamp > l.lastStamp {
			between = append(between, rf)
		}
	}
	// The oldest of them is the file just finished, unless it is gone
	// (deleted as the oldest: then it shows as another inode, or not).
	if old != nil && len(between) > 0 {
		first := between[0]
		mine := first.gz
		if !first.gz {
			if st, err := os.Stat(filepath.Join(dir, first.name)); err == nil && idOf(st) == oldID {
				mine = true
			}
		}
		if mine {
			l.lastStamp = first.stamp
			between = between[1:]
		}
	}
	for _, rf := range between {
		p := filepath.Join(dir, rf.name)
		if !rf.gz {
			if st, err := os.Stat(p); err == nil && idOf(st) == l.curID {
				break // the file just opened, rotated meanwhile
			}
		}
		if err := l.r.readSource(ctx, source{path: p, gz: rf.gz}, l.e); err != nil {
			return err
		}
		l.lastStamp = rf.stamp
	}
	return nil
}
