package remote

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists the images that pass filter (nil: all).
// Deadline: ListTimeout.
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	resp, err := invoke(ctx, c, "ListImages", "", c.cfg.ListTimeout,
		func(ctx context.Context, _ rtClient, img imgClient) (*runtimeapi.ListImagesResponse, error) {
			return img.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: filter})
		})
	if err != nil {
		return nil, err
	}
	return resp.GetImages(), nil
}

// ImageStatus returns an image's status; resp.Image is nil if the runtime
// does not have it (that is not an error). Deadline: ListTimeout.
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	ref := image.GetImage()
	resp, err := invoke(ctx, c, "ImageStatus", ref, c.cfg.ListTimeout,
		func(ctx context.Context, _ rtClient, img imgClient) (*runtimeapi.ImageStatusResponse, error) {
			return img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose})
		})
	if err != nil {
		return nil, err
	}
	if im := resp.GetImage(); im != nil && im.GetId() == "" {
		return nil, invalidResponse("ImageStatus", ref, "image without ID")
	}
	return resp, nil
}

// PullImage pulls an image and returns its reference (usually the digest).
// Deadline: PullTimeout.
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ref := image.GetImage()
	resp, err := invoke(ctx, c, "PullImage", ref, c.cfg.PullTimeout,
		func(ctx context.Context, _ rtClient, img imgClient) (*runtimeapi.PullImageResponse, error) {
			return img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: podSandboxConfig})
		})
	if err != nil {
		return "", err
	}
	if resp.GetImageRef() == "" {
		return "", invalidResponse("PullImage", ref, "no image reference")
	}
	return resp.GetImageRef(), nil
}

// RemoveImage removes an image. Deadline: CallTimeout.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	_, err := invoke(ctx, c, "RemoveImage", image.GetImage(), c.cfg.CallTimeout,
		func(ctx context.Context, _ rtClient, img imgClient) (*runtimeapi.RemoveImageResponse, error) {
			return img.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: image})
		})
	return err
}

// ImageFsInfo returns the usage of the file systems that hold images and
// container layers. Deadline: ListTimeout.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return invoke(ctx, c, "ImageFsInfo", "", c.cfg.ListTimeout,
		func(ctx context.Context, _ rtClient, img imgClient) (*runtimeapi.ImageFsInfoResponse, error) {
			return img.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
		})
}
