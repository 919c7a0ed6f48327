//go:build e2e

package imagegc_test

import (
	"context"
	"os"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction/imagegc"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// TestE2EPinnedImageKept: containerd 2.x reports its sandbox image
// (pinned_images.sandbox in hack/containerd.sh's config) as Pinned in CRI
// ListImages, and image GC keeps it although nothing uses it and no
// SandboxImage is configured. Every other image is reported in use, so the
// pause image is the only candidate and nothing else can be removed.
// containerd 1.6 does not pin images: the test skips there.
func TestE2EPinnedImageKept(t *testing.T) {
	ep := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if ep == "" {
		t.Skip("NODEKIT_CRI_ENDPOINT is not set: start containerd with hack/containerd.sh")
	}
	if os.Getenv("NODEKIT_CONTAINERD") != "2" {
		t.Skip("containerd 1.6 reports no pinned images (NODEKIT_CONTAINERD=2 runs this test)")
	}
	pause := os.Getenv("NODEKIT_PAUSE_IMAGE")
	if pause == "" {
		pause = "localhost/nodekit/pause:1"
	}
	ctx := t.Context()
	c, err := remote.New(remote.Config{Endpoint: ep, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.WithoutCancel(ctx)) })
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("Connect %s: %v", ep, err)
	}
	st, err := c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pause}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus(%s): %v %v", pause, st, err)
	}
	pauseID := st.GetImage().GetId()
	if !st.GetImage().GetPinned() {
		t.Fatalf("containerd 2.x does not report its sandbox image %s as pinned", pause)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	gc, err := imagegc.New(imagegc.Config{
		Images: c,
		InUse: imagegc.InUseFunc(func(ctx context.Context) ([]string, error) {
			imgs, err := c.ListImages(ctx, nil)
			if err != nil {
				return nil, err
			}
			var used []string
			for _, im := range imgs {
				if im.GetId() != pauseID {
					used = append(used, im.GetId())
				}
			}
			return used, nil
		}),
		FsStats: func(context.Context) (uint64, uint64, error) { return 100, 1, nil },
		Clock:   clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.DetectImages(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour) // every image is past MinAge
	if err := gc.DeleteUnusedImages(ctx); err != nil {
		t.Fatalf("DeleteUnusedImages: %v", err)
	}
	if err := gc.GarbageCollect(ctx); err != nil {
		t.Logf("GarbageCollect at 99%% usage: %v (expected: the pinned image cannot be freed)", err)
	}
	st, err = c.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pause}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("the pinned sandbox image %s was removed by image GC: %v %v", pause, st, err)
	}
	found := false
	for _, r := range gc.Images() {
		if r.ID == pauseID {
			found = true
			if !r.Pinned {
				t.Fatalf("image GC's record of %s is not pinned: %+v", pause, r)
			}
		}
	}
	if !found {
		t.Fatalf("image GC does not know %s (%s)", pause, pauseID)
	}
}
