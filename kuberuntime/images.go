package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kubetypes"
)

// imageWithDefaultTag adds ":latest" to a reference with neither tag nor
// digest, and says whether the result is tagged latest (digest-less).
func imageWithDefaultTag(image string) (string, bool) {
	if strings.Contains(image, "@") {
		return image, false
	}
	last := image
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		last = image[i+1:]
	}
	i := strings.LastIndexByte(last, ':')
	if i < 0 {
		return image + ":latest", true
	}
	return image, last[i+1:] == "latest"
}

// pullPolicy is the container's policy, or the API default when empty:
// Always for :latest or untagged images, else IfNotPresent.
func pullPolicy(c *v1.Container) v1.PullPolicy {
	if c.ImagePullPolicy != "" {
		return c.ImagePullPolicy
	}
	if _, latest := imageWithDefaultTag(c.Image); latest {
		return v1.PullAlways
	}
	return v1.PullIfNotPresent
}

// ensureImage makes the container's image present per its pull policy and
// returns the reference to create the container from. present holds the
// references of images this sync round already found present (nil: none).
// Errors wrap ErrImageNeverPull, ErrImageInspect, ErrImagePull or
// ErrImagePullBackOff.
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, secrets []v1.Secret, sandbox *runtimeapi.PodSandboxConfig, present map[string]string) (string, error) {
	image, _ := imageWithDefaultTag(c.Image)
	policy := pullPolicy(c)
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}

	if policy != v1.PullAlways {
		if ref := present[image]; ref != "" {
			m.imagePresent(pod, c, image)
			return ref, nil
		}
		cctx, cancel := m.callCtx(ctx)
		resp, err := m.cfg.Images.ImageStatus(cctx, spec, false)
		cancel()
		if err != nil {
			m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonInspectFailed, fmt.Sprintf("Failed to inspect image %q: %v", image, err))
			return "", fmt.Errorf("%w: image %q: %w", ErrImageInspect, image, err)
		}
		if img := resp.GetImage(); img != nil {
			m.imagePresent(pod, c, image)
			if img.GetId() != "" {
				return img.GetId(), nil
			}
			return image, nil
		}
		if policy == v1.PullNever {
			msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
			m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonErrImageNeverPull, msg)
			return "", fmt.Errorf("%w: container image %q is not present with pull policy of Never", ErrImageNeverPull, image)
		}
	}

	key := string(pod.UID) + "/" + image
	if in, delay, lastErr := m.imageBackoff.inBackOffSinceUpdate(key); in {
		msg := fmt.Sprintf("Back-off pulling image %q (%v)", image, delay)
		event := fmt.Sprintf("Back-off pulling image %q", image)
		if lastErr != "" {
			msg += ": " + lastErr
			event += ": " + lastErr
		}
		m.containerEvent(pod, c.Name, "", v1.EventTypeNormal, kubetypes.ReasonBackOff, event)
		return "", fmt.Errorf("%w: %s", ErrImagePullBackOff, msg)
	}

	m.containerEvent(pod, c.Name, "", v1.EventTypeNormal, kubetypes.ReasonPulling, fmt.Sprintf("Pulling image %q", image))
	start := m.cfg.Clock.Now()
	ref, err := m.pull(ctx, spec, c.Image, secrets, sandbox)
	if err != nil {
		m.imageBackoff.next(key, m.cfg.Clock.Now(), err.Error())
		m.log.Info("image pull failed", zap.String("pod", podTarget(pod)), zap.String("image", image), zap.Error(err))
		m.containerEvent(pod, c.Name, "", v1.EventTypeWarning, kubetypes.ReasonFailed, fmt.Sprintf("Failed to pull image %q: %v", image, err))
		return "", fmt.Errorf("%w: image %q: %w", ErrImagePull, image, err)
	}
	took := m.cfg.Clock.Since(start)
	m.containerEvent(pod, c.Name, "", v1.EventTypeNormal, kubetypes.ReasonPulled,
		fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting)", image, took, took))
	m.imageBackoff.reset(key)
	if ref == "" {
		ref = image
	}
	return ref, nil
}

// pull pulls the image, trying each matching auth from the pull secrets in
// turn (anonymous when none matches).
func (m *Manager) pull(ctx context.Context, spec *runtimeapi.ImageSpec, userImage string, secrets []v1.Secret, sandbox *runtimeapi.PodSandboxConfig) (string, error) {
	var auths []*runtimeapi.AuthConfig
	if len(secrets) > 0 {
		var err error
		auths, err = m.builder.pullAuths(userImage, secrets)
		if err != nil {
			return "", fmt.Errorf("pull secrets: %w", err)
		}
	}
	if len(auths) == 0 {
		auths = []*runtimeapi.AuthConfig{nil}
	}
	var errs []error
	for _, auth := range auths {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		pctx, cancel := context.WithTimeout(ctx, m.cfg.PullTimeout)
		ref, err := m.cfg.Images.PullImage(pctx, spec, auth, sandbox)
		cancel()
		if err == nil {
			return ref, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return "", errs[0]
	}
	return "", errors.Join(errs...)
}

// imagePresent records the Pulled event of an image found on the node.
func (m *Manager) imagePresent(pod *v1.Pod, c *v1.Container, image string) {
	m.containerEvent(pod, c.Name, "", v1.EventTypeNormal, kubetypes.ReasonPulled, fmt.Sprintf("Container image %q already present on machine", image))
}
