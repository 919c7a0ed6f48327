package lifecycle_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/lifecycle"
)

// ticker is a component that follows the contract: Run at most once, nil
// on a clean stop.
type ticker struct {
	once lifecycle.Once
}

func (t *ticker) Run(ctx context.Context) error {
	if err := t.once.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

func ExampleOnce() {
	ctx, cancel := context.WithCancel(context.Background())
	t := &ticker{}
	done := make(chan error, 1)
	go func() { done <- t.Run(ctx) }()
	cancel()
	fmt.Println("first Run:", <-done)
	err := t.Run(context.Background())
	fmt.Println("second Run:", err)
	fmt.Println("is ErrAlreadyRan:", errors.Is(err, lifecycle.ErrAlreadyRan))
	// Output:
	// first Run: <nil>
	// second Run: lifecycle: Run already called
	// is ErrAlreadyRan: true
}

func ExampleStoppedEarly() {
	boom := errors.New("disk gone")
	err := lifecycle.StoppedEarly("status manager", boom)
	fmt.Println(err)
	fmt.Println(errors.Is(err, lifecycle.ErrStoppedEarly), errors.Is(err, boom))
	fmt.Println(lifecycle.StoppedEarly("pod workers", nil))
	// Output:
	// lifecycle: stopped early: status manager: disk gone
	// true true
	// lifecycle: stopped early: pod workers: returned early
}
