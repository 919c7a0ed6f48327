package logs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func appendFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
}

// follower runs a following ReadLogs on a fake clock inside a synctest
// bubble.
type follower struct {
	t       *testing.T
	clk     *clocktesting.FakeClock
	out     syncBuf
	running atomic.Bool
	checks  atomic.Int32
	done    chan error
}

func startFollower(t *testing.T, path string, opts Options) *follower {
	f := &follower{t: t, clk: clocktesting.NewFakeClock(t0), done: make(chan error, 1)}
	f.running.Store(true)
	r, err := NewReader(ReaderConfig{Clock: f.clk, PollInterval: 100 * time.Millisecond, AliveInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opts.Follow = true
	alive := func(context.Context) (bool, error) {
		f.checks.Add(1)
		return f.running.Load(), nil
	}
	go func() { f.done <- r.ReadLogs(t.Context(), path, opts, alive, &f.out, &f.out) }()
	synctest.Wait()
	return f
}

// poll lets the follower take one more look (one poll interval).
func (f *follower) poll() {
	f.clk.Step(100 * time.Millisecond)
	synctest.Wait()
}

func (f *follower) expect(want string) {
	f.t.Helper()
	if got := f.out.String(); got != want {
		f.t.Fatalf("followed %q, want %q", got, want)
	}
}

func TestFollowAcrossRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "0.log")
		writeFile(t, path, encode(lines(1, 3)))
		f := startFollower(t, path, Options{TailLines: 2})
		f.expect(want(2, 3))

		appendFile(t, path, encode(lines(4, 5)))
		f.poll()
		f.expect(want(2, 5))

		// Rotation: the runtime writes one more line to the renamed file,
		// then reopens (a new file at path).
		rotated := path + ".20261126-120000"
		if err := os.Rename(path, rotated); err != nil {
			t.Fatal(err)
		}
		appendFile(t, rotated, encode(lines(6, 6)))
		f.poll()
		f.expect(want(2, 6))
		appendFile(t, path, encode(lines(7, 8)))
		f.poll()
		f.expect(want(2, 8))

		// A partial line is written as it comes.
		appendFile(t, path, encode([]rec{{s: Stdout, partial: true, msg: "half "}}))
		f.poll()
		f.expect(want(2, 8) + "half ")
		appendFile(t, path, encode([]rec{{s: Stdout, msg: "done"}}))
		f.poll()
		f.expect(want(2, 8) + "half done\n")

		// The container exits: what it wrote last is read, then the
		// follower stops.
		appendFile(t, path, encode(lines(9, 9)))
		f.running.Store(false)
		f.clk.Step(time.Second)
		synctest.Wait()
		select {
		case err := <-f.done:
			if err != nil {
				t.Fatalf("follow ended with %v", err)
			}
		default:
			t.Fatal("follower still running after the container exited")
		}
		f.expect(want(2, 8) + "half done\n" + want(9, 9))
		if n := f.checks.Load(); n < 1 || n > 3 {
			t.Fatalf("asked whether the container runs %d times, want 1-3 (once a second)", n)
		}
	})
}

func TestFollowWaitsForTheFileAndStopsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "0.log")
		clk := clocktesting.NewFakeClock(t0)
		r, err := NewReader(ReaderConfig{Clock: clk, PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var out syncBuf
		done := make(chan error, 1)
		go func() {
			done <- r.ReadLogs(ctx, path, Options{TailLines: AllLines, Follow: true},
				func(context.Context) (bool, error) { return true, nil }, &out, &out)
		}()
		synctest.Wait()
		writeFile(t, path, encode(lines(1, 2)))
		clk.Step(100 * time.Millisecond)
		synctest.Wait()
		if out.String() != want(1, 2) {
			t.Fatalf("after the file appeared: %q", out.String())
		}
		cancel()
		synctest.Wait()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled follow: %v", err)
		}
	})
}

func TestFollowNotRunningReadsToTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path, encode(lines(1, 3)))
	var out bytes.Buffer
	r := newTestReader(t)
	err := r.ReadLogs(context.Background(), path, Options{TailLines: AllLines, Follow: true},
		func(context.Context) (bool, error) { return false, nil }, &out, &out)
	if err != nil || out.String() != want(1, 3) {
		t.Fatalf("follow of an exited container: %q %v", out.String(), err)
	}
}

// A follower slower than the rotations reads the files rotated in
// between, compressed or not, instead of jumping to the newest.
func TestFollowReadsEveryRotationInBetween(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "0.log")
		writeGz(t, path+".20261126-100000.gz", encode(lines(1, 2))) // older than the follow
		writeFile(t, path, encode(lines(3, 4)))
		f := startFollower(t, path, Options{TailLines: 1})
		f.expect(want(4, 4))

		// Three rotations before the follower looks again; the first of
		// them has already been compressed.
		appendFile(t, path, encode(lines(5, 5)))
		if err := os.Rename(path, path+".20261126-120001"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, encode(lines(6, 7)))
		if err := os.Rename(path, path+".20261126-120002"); err != nil {
			t.Fatal(err)
		}
		writeGz(t, path+".20261126-120002.gz", encode(lines(6, 7)))
		os.Remove(path + ".20261126-120002")
		writeFile(t, path, encode(lines(8, 9)))
		if err := os.Rename(path, path+".20261126-120003"); err != nil {
			t.Fatal(err)
		}
		writeFile(t, path, encode(lines(10, 10)))
		f.poll()
		f.poll()
		f.expect(want(4, 10))
		appendFile(t, path, encode(lines(11, 11)))
		f.poll()
		f.expect(want(4, 11))
	})
}
