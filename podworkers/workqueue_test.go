package podworkers

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestWorkQueueGetWork(t *testing.T) {
	start := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := testingclock.NewFakePassiveClock(start)
	q := NewWorkQueue(clk)

	steps := []struct {
		name    string
		enqueue map[types.UID]time.Duration
		advance time.Duration
		want    []types.UID
		left    int
	}{
		{name: "empty queue", want: nil},
		{name: "zero delay is not due at the same instant", enqueue: map[types.UID]time.Duration{"a": 0}, want: nil, left: 1},
		{name: "due once the clock moves", advance: time.Nanosecond, want: []types.UID{"a"}},
		{name: "taken items are gone", want: nil},
		{
			name:    "only items strictly before now, sorted",
			enqueue: map[types.UID]time.Duration{"c": -time.Second, "b": -time.Minute, "d": time.Second, "e": time.Hour},
			want:    []types.UID{"b", "c"}, left: 2,
		},
		{name: "exactly due is not yet due", advance: time.Second, want: nil, left: 2},
		{name: "later", advance: time.Nanosecond, want: []types.UID{"d"}, left: 1},
		{name: "enqueue overwrites an earlier due time", enqueue: map[types.UID]time.Duration{"e": -time.Second}, want: []types.UID{"e"}},
	}
	for _, s := range steps {
		for uid, d := range s.enqueue {
			q.Enqueue(uid, d)
		}
		clk.SetTime(clk.Now().Add(s.advance))
		if got := q.GetWork(); !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: GetWork = %v, want %v", s.name, got, s.want)
		}
		if got := q.Len(); got != s.left {
			t.Fatalf("%s: Len = %d, want %d", s.name, got, s.left)
		}
	}
}

func TestWorkQueueOverwriteLater(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	q := NewWorkQueue(clk)
	q.Enqueue("a", -time.Second)
	q.Enqueue("a", time.Minute) // a later due time replaces an earlier one too
	if got := q.GetWork(); len(got) != 0 {
		t.Fatalf("GetWork = %v, want nothing (overwritten with a later time)", got)
	}
	clk.SetTime(clk.Now().Add(time.Minute + 1))
	if got := q.GetWork(); !reflect.DeepEqual(got, []types.UID{"a"}) {
		t.Fatalf("GetWork = %v, want [a]", got)
	}
}

func TestWorkQueueNilClock(t *testing.T) {
	q := NewWorkQueue(nil)
	q.Enqueue("a", -time.Hour)
	if got := q.GetWork(); !reflect.DeepEqual(got, []types.UID{"a"}) {
		t.Fatalf("GetWork = %v, want [a]", got)
	}
}

func BenchmarkWorkQueue(b *testing.B) {
	clk := testingclock.NewFakePassiveClock(time.Unix(1000, 0))
	q := NewWorkQueue(clk)
	uids := make([]types.UID, 100)
	for i := range uids {
		uids[i] = types.UID(string(rune('a'+i%26)) + string(rune('a'+i/26)))
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, u := range uids {
			q.Enqueue(u, -time.Second)
		}
		if len(q.GetWork()) != len(uids) {
			b.Fatal("lost items")
		}
	}
}
