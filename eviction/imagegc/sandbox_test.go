package imagegc_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodekit/nodekit/eviction/imagegc"
)

// sandboxRuntime is a CRI stub for the sandbox-image sources: a verbose
// Status with a runtime config JSON, and sandboxes with verbose info.
type sandboxRuntime struct {
	config     string
	sandboxes  map[string]string // id -> info JSON
	statusErr  error
	sbStatuses int
}

func (r *sandboxRuntime) Status(_ context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if r.statusErr != nil {
		return nil, r.statusErr
	}
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	if verbose && r.config != "" {
		resp.Info = map[string]string{"config": r.config}
	}
	return resp, nil
}

func (r *sandboxRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	var out []*runtimeapi.PodSandbox
	for id := range r.sandboxes {
		out = append(out, &runtimeapi.PodSandbox{Id: id, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY})
	}
	return out, nil
}

func (r *sandboxRuntime) PodSandboxStatus(_ context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	r.sbStatuses++
	info, ok := r.sandboxes[id]
	if !ok {
		return nil, errors.New("not found")
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: id}}
	if verbose {
		resp.Info = map[string]string{"info": info}
	}
	return resp, nil
}

// TestForcedGCKeepsSandboxImages: with image GC forced (every unused image
// removed), the sandbox image the runtime's verbose Status names
// (containerd 1.6: "sandboxImage"; 2.x: "pinned_images") and the image of
// any sandbox on the node (containerd's sandbox info "image") are kept
// although no container uses them and no SandboxImage is configured;
// other unused images go.
func TestForcedGCKeepsSandboxImages(t *testing.T) {
	for name, config := range map[string]string{
		"containerd 1.6": `{"containerd":{"snapshotter":"overlayfs"},"sandboxImage":"localhost/nodekit/pause:1","restrictOOMScoreAdj":true}`,
		"containerd 2.x": `{"containerd":{},"pinned_images":{"sandbox":"localhost/nodekit/pause:1"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			f := &images{capacity: 100 * mib, available: 1 * mib}
			f.add("sha256:pause", mib, "localhost/nodekit/pause:1")
			f.add("sha256:oldpause", mib, "registry.k8s.io/pause:3.6")
			f.add("sha256:busy", mib, "localhost/nodekit/busybox:1")
			f.add("sha256:unused", mib, "docker.io/library/unused:1")
			rt := &sandboxRuntime{config: config, sandboxes: map[string]string{
				"sb1": `{"pid":0,"image":"registry.k8s.io/pause:3.6"}`,
			}}
			clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
			gc, err := imagegc.New(imagegc.Config{
				Images:  f,
				InUse:   imagegc.Union(f, imagegc.Sandboxes(rt), imagegc.RuntimeSandboxImage(rt)),
				FsStats: f.fsStats,
				Clock:   clk,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := gc.DetectImages(t.Context()); err != nil {
				t.Fatal(err)
			}
			clk.Step(time.Hour)
			if err := gc.DeleteUnusedImages(t.Context()); err != nil {
				t.Fatal(err)
			}
			slices.Sort(f.removed)
			if want := []string{"sha256:busy", "sha256:unused"}; !slices.Equal(f.removed, want) {
				t.Fatalf("removed %v, want %v (the configured and the sandboxes' pause images kept)", f.removed, want)
			}
			// The sandbox's image was read once and remembered.
			if err := gc.DeleteUnusedImages(t.Context()); err != nil {
				t.Fatal(err)
			}
			if rt.sbStatuses != 1 {
				t.Errorf("%d sandbox status calls for one sandbox over two collections, want 1", rt.sbStatuses)
			}
		})
	}
}

// TestRuntimeSandboxImageStatusError: a failed Status stops the
// collection (nothing removed without knowing the sandbox image); a
// runtime whose Status names no sandbox image adds nothing.
func TestRuntimeSandboxImageStatusError(t *testing.T) {
	f := &images{capacity: 100 * mib, available: 1 * mib}
	f.add("sha256:pause", mib, "localhost/nodekit/pause:1")
	rt := &sandboxRuntime{statusErr: errors.New("runtime down")}
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	gc, err := imagegc.New(imagegc.Config{Images: f, InUse: imagegc.Union(f, imagegc.RuntimeSandboxImage(rt)), FsStats: f.fsStats, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	if err := gc.DeleteUnusedImages(t.Context()); !errors.Is(err, imagegc.ErrRuntime) {
		t.Fatalf("DeleteUnusedImages with Status failing: %v, want ErrRuntime", err)
	}
	if len(f.removed) != 0 {
		t.Fatalf("removed %v while the sandbox image was unknown", f.removed)
	}
	refs, err := imagegc.RuntimeSandboxImage(&sandboxRuntime{config: `not json`}).ImagesInUse(t.Context())
	if err != nil || len(refs) != 0 {
		t.Fatalf("unparseable config: %v %v", refs, err)
	}
}
