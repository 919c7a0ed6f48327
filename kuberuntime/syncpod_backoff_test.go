package kuberuntime

import (
	"errors"
	"testing"
	"time"
)

func TestBackoffErrorCarriesExpiry(t *testing.T) {
	until := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	var err error = errors.Join(errors.New("other step"), &BackoffError{Err: ErrCrashLoopBackOff, Until: until})
	if !errors.Is(err, ErrCrashLoopBackOff) {
		t.Fatal("errors.Is lost the sentinel")
	}
	var b interface{ BackoffUntil() time.Time }
	if !errors.As(err, &b) || !b.BackoffUntil().Equal(until) {
		t.Fatalf("BackoffUntil not found through Join: %v", err)
	}
}
