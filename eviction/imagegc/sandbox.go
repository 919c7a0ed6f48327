package imagegc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeStatuser is the CRI Status call.
type RuntimeStatuser interface {
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// RuntimeSandboxImage is the InUse of the sandbox (pause) image the runtime
// is configured with, as its verbose CRI Status names it: containerd 1.6
// puts its CRI configuration, with "sandboxImage", in Info["config"];
// containerd 2.x names it in "pinned_images" (and also reports it Pinned
// in ListImages). A runtime that names none adds nothing; a Status that
// fails is an error, so nothing is collected without knowing it.
func RuntimeSandboxImage(s RuntimeStatuser) InUse {
	return InUseFunc(func(ctx context.Context) ([]string, error) {
		resp, err := s.Status(ctx, true)
		if err != nil {
			return nil, fmt.Errorf("runtime status: %w", err)
		}
		return sandboxImagesFromConfig(resp.GetInfo()["config"]), nil
	})
}

// sandboxImagesFromConfig reads the sandbox images from the runtime
// configuration JSON of a verbose CRI Status (nil when it names none or is
// not JSON).
func sandboxImagesFromConfig(config string) []string {
	if config == "" {
		return nil
	}
	var c struct {
		SandboxImage string            `json:"sandboxImage"`
		Pinned       map[string]string `json:"pinned_images"`
		PinnedCamel  map[string]string `json:"pinnedImages"`
		ImageConfig  *struct {
			Pinned map[string]string `json:"pinned_images"`
		} `json:"imageConfig"`
	}
	if json.Unmarshal([]byte(config), &c) != nil {
		return nil
	}
	var out []string
	if c.SandboxImage != "" {
		out = append(out, c.SandboxImage)
	}
	maps := []map[string]string{c.Pinned, c.PinnedCamel}
	if c.ImageConfig != nil {
		maps = append(maps, c.ImageConfig.Pinned)
	}
	for _, m := range maps {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if m[k] != "" {
				out = append(out, m[k])
			}
		}
	}
	return out
}

// SandboxLister is the CRI sandbox list and status calls.
type SandboxLister interface {
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
}

// Sandboxes is the InUse of the images of every sandbox the runtime lists,
// ready or not, as their verbose CRI PodSandboxStatus names them
// (containerd: Info["info"], "image"). Each sandbox's image is read once
// and remembered for as long as the sandbox is listed. A sandbox whose
// status can't be read (removed meanwhile) is skipped and read again at the
// next call; a failed listing is an error.
func Sandboxes(l SandboxLister) InUse {
	s := &sandboxImages{l: l, byID: map[string]string{}}
	return InUseFunc(s.imagesInUse)
}

type sandboxImages struct {
	l    SandboxLister
	mu   sync.Mutex
	byID map[string]string // sandbox id -> image ("" when not reported)
}

func (s *sandboxImages) imagesInUse(ctx context.Context) ([]string, error) {
	sbs, err := s.l.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	listed := make(map[string]bool, len(sbs))
	var out []string
	for _, sb := range sbs {
		id := sb.GetId()
		if id == "" {
			continue
		}
		listed[id] = true
		img, ok := s.byID[id]
		if !ok {
			resp, err := s.l.PodSandboxStatus(ctx, id, true)
			if err != nil {
				if ctx.Err() != nil {
					return nil, errors.Join(err, ctx.Err())
				}
				continue
			}
			img = sandboxImageFromInfo(resp.GetInfo()["info"])
			s.byID[id] = img
		}
		if img != "" {
			out = append(out, img)
		}
	}
	for id := range s.byID {
		if !listed[id] {
			delete(s.byID, id)
		}
	}
	return out, nil
}

// sandboxImageFromInfo reads "image" from a sandbox's verbose info JSON.
func sandboxImageFromInfo(info string) string {
	if info == "" {
		return ""
	}
	var i struct {
		Image string `json:"image"`
	}
	if json.Unmarshal([]byte(info), &i) != nil {
		return ""
	}
	return i.Image
}

// Union is the InUse of every image any of sources lists; it fails when
// any of them fails (nothing is collected on a partial view).
func Union(sources ...InUse) InUse {
	return InUseFunc(func(ctx context.Context) ([]string, error) {
		var out []string
		for _, s := range sources {
			refs, err := s.ImagesInUse(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, refs...)
		}
		return out, nil
	})
}
