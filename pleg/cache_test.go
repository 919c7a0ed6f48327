package pleg

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

type getResult struct {
	st  *kubetypes.PodStatus
	err error
}

func getNewerThanAsync(ctx context.Context, c *Cache, uid types.UID, t time.Time) <-chan getResult {
	ch := make(chan getResult, 1)
	go func() {
		st, err := c.GetNewerThan(ctx, uid, t)
		ch <- getResult{st, err}
	}()
	return ch
}

func blocked(ch <-chan getResult) bool {
	synctest.Wait()
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

func TestCacheGetSetDelete(t *testing.T) {
	c := NewCache(nil)
	st, err := c.Get("x")
	if err != nil || st == nil || st.ID != "x" {
		t.Fatalf("unknown pod: %+v %v", st, err)
	}
	want := &kubetypes.PodStatus{ID: "x", Name: "n"}
	if !c.Set("x", want, nil, epoch) {
		t.Fatal("Set refused")
	}
	if st, _ := c.Get("x"); st != want {
		t.Fatalf("got %+v", st)
	}
	// An older record is refused; an equal or newer one is taken.
	if c.Set("x", &kubetypes.PodStatus{ID: "x"}, nil, epoch.Add(-time.Second)) {
		t.Fatal("older record stored")
	}
	boom := errors.New("boom")
	if !c.Set("x", nil, boom, epoch) {
		t.Fatal("equal time refused")
	}
	if st, err := c.Get("x"); st != nil || !errors.Is(err, boom) {
		t.Fatalf("got %+v %v", st, err)
	}
	c.Delete("x")
	if st, err := c.Get("x"); err != nil || st.ID != "x" || st.Name != "" {
		t.Fatalf("after Delete: %+v %v", st, err)
	}
}

func TestCacheGetNewerThan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		c := NewCache(nil)
		c.Set("p", &kubetypes.PodStatus{ID: "p", Name: "old"}, nil, epoch)

		// Already newer: returns at once.
		if st, err := c.GetNewerThan(ctx, "p", epoch.Add(-time.Second)); err != nil || st.Name != "old" {
			t.Fatalf("got %+v %v", st, err)
		}

		// Not newer: blocks until a Set at or after the time.
		res := getNewerThanAsync(ctx, c, "p", epoch.Add(time.Second))
		other := getNewerThanAsync(ctx, c, "q", epoch.Add(time.Second))
		if !blocked(res) || !blocked(other) {
			t.Fatal("did not block")
		}
		c.Set("p", &kubetypes.PodStatus{ID: "p", Name: "still old"}, nil, epoch.Add(time.Millisecond))
		if !blocked(res) {
			t.Fatal("woken by an older record")
		}
		c.Set("p", &kubetypes.PodStatus{ID: "p", Name: "new"}, nil, epoch.Add(2*time.Second))
		if r := <-res; r.err != nil || r.st.Name != "new" {
			t.Fatalf("got %+v", r)
		}
		if !blocked(other) {
			t.Fatal("a Set of p woke a waiter of q")
		}

		// UpdateTime wakes every satisfied waiter; a pod without a record
		// yields an empty status.
		late := getNewerThanAsync(ctx, c, "q", epoch.Add(time.Hour))
		c.UpdateTime(epoch.Add(time.Second))
		if r := <-other; r.err != nil || r.st.ID != "q" || r.st.Name != "" {
			t.Fatalf("got %+v", r)
		}
		if !blocked(late) {
			t.Fatal("UpdateTime woke a waiter for a later time")
		}
		// Once the global time is newer, calls return at once.
		if st, err := c.GetNewerThan(ctx, "p", epoch); err != nil || st.Name != "new" {
			t.Fatalf("got %+v %v", st, err)
		}

		// SetObservedTime releases a waiter without changing the record.
		obs := getNewerThanAsync(ctx, c, "p", epoch.Add(time.Minute))
		if !blocked(obs) {
			t.Fatal("did not block")
		}
		c.SetObservedTime("p", epoch.Add(time.Minute))
		if r := <-obs; r.st.Name != "new" {
			t.Fatalf("got %+v", r)
		}
		if st, err := c.GetNewerThan(ctx, "p", epoch.Add(30*time.Second)); err != nil || st.Name != "new" {
			t.Fatalf("observed time not kept: %+v %v", st, err)
		}

		c.UpdateTime(epoch.Add(2 * time.Hour))
		<-late
		if c.waiting() != 0 {
			t.Fatalf("%d waiters left", c.waiting())
		}
	})
}

func TestCacheGetNewerThanContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCache(nil)
		ctx, cancel := context.WithCancel(t.Context())
		a := getNewerThanAsync(ctx, c, "p", epoch)
		b := getNewerThanAsync(t.Context(), c, "p", epoch)
		if !blocked(a) || !blocked(b) {
			t.Fatal("did not block")
		}
		cancel()
		if r := <-a; !errors.Is(r.err, context.Canceled) || r.st != nil {
			t.Fatalf("got %+v", r)
		}
		if c.waiting() != 1 {
			t.Fatalf("%d waiters, want the other one only", c.waiting())
		}
		if !blocked(b) {
			t.Fatal("cancel woke another waiter")
		}
		c.UpdateTime(epoch)
		if r := <-b; r.err != nil {
			t.Fatal(r.err)
		}

		// A deadline ends the wait too.
		dctx, dcancel := context.WithTimeout(t.Context(), time.Second)
		defer dcancel()
		if _, err := c.GetNewerThan(dctx, "p", epoch.Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v", err)
		}
		if c.waiting() != 0 {
			t.Fatal("waiter left behind")
		}
	})
}

func TestCacheConcurrent(t *testing.T) {
	c := NewCache(nil)
	ctx := t.Context()
	done := make(chan struct{})
	for i := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for j := range 200 {
				ts := epoch.Add(time.Duration(j) * time.Millisecond)
				uid := types.UID(rune('a' + i%3))
				switch j % 4 {
				case 0:
					c.Set(uid, &kubetypes.PodStatus{ID: uid}, nil, ts)
				case 1:
					_, _ = c.Get(uid)
				case 2:
					c.UpdateTime(ts)
				case 3:
					_, _ = c.GetNewerThan(ctx, uid, epoch.Add(-time.Millisecond)) // satisfied by the first Set or UpdateTime
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}
