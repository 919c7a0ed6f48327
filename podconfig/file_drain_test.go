package podconfig

import (
	"testing"

	"github.com/fsnotify/fsnotify"
)

// A burst of queued file events is taken in one go (one scan for all).
func TestDrainEvents(t *testing.T) {
	ch := make(chan fsnotify.Event, 4)
	for _, n := range []string{"a.yaml", "b.yaml", "c.yaml"} {
		ch <- fsnotify.Event{Name: n, Op: fsnotify.Create}
	}
	if drainEvents(ch) {
		t.Fatal("an open channel reported closed")
	}
	if len(ch) != 0 {
		t.Fatalf("%d events left", len(ch))
	}
	if drainEvents(ch) {
		t.Fatal("an empty open channel reported closed")
	}
	ch <- fsnotify.Event{Name: "d.yaml"}
	close(ch)
	if !drainEvents(ch) {
		t.Fatal("a closed channel not reported")
	}
}
