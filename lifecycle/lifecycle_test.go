package lifecycle

import (
	"errors"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestOnceStartsOnce(t *testing.T) {
	var o Once
	if o.Started() {
		t.Fatal("zero Once reports Started")
	}
	if err := o.Start(); err != nil {
		t.Fatalf("first Start = %v", err)
	}
	if !o.Started() {
		t.Error("Started = false after Start")
	}
	for i := range 3 {
		if err := o.Start(); !errors.Is(err, ErrAlreadyRan) {
			t.Errorf("Start #%d = %v, want ErrAlreadyRan", i+2, err)
		}
	}
}

func TestOnceConcurrentStartHasOneWinner(t *testing.T) {
	var o Once
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() { errs <- o.Start() })
	}
	wg.Wait()
	close(errs)
	wins := 0
	for err := range errs {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrAlreadyRan):
			t.Errorf("Start = %v", err)
		}
	}
	if wins != 1 {
		t.Errorf("%d Starts returned nil, want 1", wins)
	}
}

func TestStoppedEarly(t *testing.T) {
	boom := errors.New("boom")
	err := StoppedEarly("child", boom)
	if !errors.Is(err, ErrStoppedEarly) || !errors.Is(err, boom) {
		t.Errorf("StoppedEarly(child, boom) = %v: does not wrap both", err)
	}
	if got, want := err.Error(), "lifecycle: stopped early: child: boom"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	err = StoppedEarly("quiet", nil)
	if !errors.Is(err, ErrStoppedEarly) || err.Error() != "lifecycle: stopped early: quiet: returned early" {
		t.Errorf("StoppedEarly(quiet, nil) = %v", err)
	}
}
