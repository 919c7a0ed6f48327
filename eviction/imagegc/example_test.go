package imagegc_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// A node whose image file system is 95% full: once the images are older
// than MinAge, GarbageCollect removes the unused one; the pause image
// stays. The in-use lister says busybox is in use.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, _ := fake.New(fake.Config{Clock: clk, ImageSize: 100, Images: []string{"busybox:1", "nginx:1", "registry.k8s.io/pause:3.10"}})
	free := uint64(50)
	gc, err := imagegc.New(imagegc.Config{
		Images:       rt,
		InUse:        imagegc.InUseFunc(func(context.Context) ([]string, error) { return []string{"busybox:1"}, nil }),
		SandboxImage: "registry.k8s.io/pause:3.10",
		FsStats:      func(context.Context) (uint64, uint64, error) { return 1000, free, nil },
		Clock:        clk,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = gc.DetectImages(ctx)
	clk.Step(imagegc.DefaultMinAge)
	err = gc.GarbageCollect(ctx)
	fmt.Println("not enough freed:", errors.Is(err, imagegc.ErrNotEnoughFreed))
	for _, img := range gc.Images() {
		fmt.Println(img.Tags, "pinned:", img.Pinned)
	}
	// Output:
	// not enough freed: true
	// [docker.io/library/busybox:1] pinned: false
	// [registry.k8s.io/pause:3.10] pinned: true
}
