package fake

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pull is one recorded successful PullImage.
type Pull struct {
	// Image is the image as requested; Ref the image id returned.
	Image string
	Ref   string
	// Auth is a copy of the credentials passed (nil for none).
	Auth *runtimeapi.AuthConfig
}

type image struct {
	id   string
	tags []string // normalized names
	size uint64
}

// normalizeImage turns "busybox" into "docker.io/library/busybox:latest"
// the way containerd does; image ids ("sha256:...") are left alone.
func normalizeImage(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "sha256:") {
		return s
	}
	name, digest, hasDigest := strings.Cut(s, "@")
	tag := ""
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name, tag = name[:i], name[i+1:]
	}
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || !(strings.ContainsAny(first, ".:") || first == "localhost") {
		if !hasSlash {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	switch {
	case hasDigest:
		if tag != "" {
			return name + ":" + tag + "@" + digest
		}
		return name + "@" + digest
	case tag == "":
		return name + ":latest"
	default:
		return name + ":" + tag
	}
}

// imageID is the deterministic id of a named image.
func imageID(normalized string) string {
	sum := sha256.Sum256([]byte(normalized))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (r *Runtime) addImageLocked(name string) *image {
	n := normalizeImage(name)
	if id, ok := r.imageNames[n]; ok {
		return r.images[id]
	}
	img := &image{id: imageID(n), tags: []string{n}, size: r.imageSize}
	if strings.HasPrefix(n, "sha256:") {
		img.id, img.tags = n, nil
	}
	r.images[img.id] = img
	r.imageNames[n] = img.id
	return img
}

// findImageLocked finds an image by name, id, or unique id prefix.
func (r *Runtime) findImageLocked(ref string) *image {
	n := normalizeImage(ref)
	if n == "" {
		return nil
	}
	if id, ok := r.imageNames[n]; ok {
		return r.images[id]
	}
	if img, ok := r.images[n]; ok {
		return img
	}
	if strings.HasPrefix(n, "sha256:") {
		var found *image
		for id, img := range r.images {
			if strings.HasPrefix(id, n) {
				if found != nil {
					return nil
				}
				found = img
			}
		}
		return found
	}
	return nil
}

func (img *image) toCRI() *runtimeapi.Image {
	out := &runtimeapi.Image{Id: img.id, RepoTags: slices.Clone(img.tags), Size: img.size, Spec: &runtimeapi.ImageSpec{Image: img.id}}
	for _, t := range img.tags {
		if strings.Contains(t, "pause") {
			out.Pinned = true
		}
		if i := strings.LastIndexByte(t, ':'); i > 0 {
			out.RepoDigests = append(out.RepoDigests, t[:i]+"@"+img.id)
		}
	}
	return out
}

// ListImages lists the present images, filtered by image name or id.
func (r *Runtime) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	if err := r.begin(ctx, "ListImages", "", filter.GetImage().GetImage(), 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if want := filter.GetImage().GetImage(); want != "" {
		if img := r.findImageLocked(want); img != nil {
			return []*runtimeapi.Image{img.toCRI()}, nil
		}
		return []*runtimeapi.Image{}, nil
	}
	out := make([]*runtimeapi.Image, 0, len(r.images))
	for _, img := range r.images {
		out = append(out, img.toCRI())
	}
	slices.SortFunc(out, func(a, b *runtimeapi.Image) int { return strings.Compare(a.Id, b.Id) })
	return out, nil
}

// ImageStatus returns the image, or a response with a nil Image when it is
// not present (not an error, as CRI says).
func (r *Runtime) ImageStatus(ctx context.Context, spec *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	if err := r.begin(ctx, "ImageStatus", "", spec.GetImage(), 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if img := r.findImageLocked(spec.GetImage()); img != nil {
		return &runtimeapi.ImageStatusResponse{Image: img.toCRI()}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

// PullImage makes the image present and returns its id, unless it is
// missing (Config.Missing / Config.Pullable). Successful pulls are recorded
// with their auth (see Pulls).
func (r *Runtime) PullImage(ctx context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ref := spec.GetImage()
	if err := r.begin(ctx, "PullImage", "", ref, 0); err != nil {
		return "", err
	}
	n := normalizeImage(ref)
	if n == "" {
		return "", coded(codes.InvalidArgument, ErrInvalidArgument, "PullImage: image name is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.missing[n] || (r.pullable != nil && !r.pullable[n]) {
		return "", coded(codes.NotFound, ErrPullFailed, "failed to pull and unpack image %q: %s: not found", ref, n)
	}
	img := r.addImageLocked(ref)
	r.pulls = append(r.pulls, Pull{Image: ref, Ref: img.id, Auth: cloneAuth(auth)})
	return img.id, nil
}

// Pulls returns the successful pulls so far, oldest first.
func (r *Runtime) Pulls() []Pull {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.pulls)
}

// SetImageMissing makes an image unpullable (missing=true) or pullable again.
// It does not remove a present image.
func (r *Runtime) SetImageMissing(name string, missing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := normalizeImage(name)
	if missing {
		r.missing[n] = true
		return
	}
	delete(r.missing, n)
	if r.pullable != nil {
		r.pullable[n] = true
	}
}

// RemoveImage removes the image; removing an absent image is not an error.
func (r *Runtime) RemoveImage(ctx context.Context, spec *runtimeapi.ImageSpec) error {
	if err := r.begin(ctx, "RemoveImage", "", spec.GetImage(), 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	img := r.findImageLocked(spec.GetImage())
	if img == nil {
		return nil
	}
	delete(r.images, img.id)
	for _, t := range img.tags {
		delete(r.imageNames, t)
	}
	delete(r.imageNames, img.id)
	return nil
}

// ImageFsInfo reports one image filesystem holding every image.
func (r *Runtime) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if err := r.begin(ctx, "ImageFsInfo", "", "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var used uint64
	for _, img := range r.images {
		used += img.size
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		Timestamp:  r.nowNano(),
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs"},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: uint64(len(r.images)) * 100},
	}}}, nil
}
