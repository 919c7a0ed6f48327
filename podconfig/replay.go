package podconfig

import (
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DecodePodList decodes a JSON PodList the agent stored itself (a persisted
// pod set) with the bounds live input has: at most MaxManifestSize bytes;
// depth, values, pods and every quantity's text checked by one scan before
// anything is decoded (a checksum proves integrity, not sanity); then per
// pod the per-pod counts, a UID and name usable as single path segments,
// and resource names (hugepage sizes bounded). It does not default or
// validate pods otherwise: they were accepted from their source before.
// Errors wrap ErrTooLarge, ErrTooDeep, ErrQuantityOutOfRange or
// ErrInvalidPod and name the item and field.
func DecodePodList(data []byte) ([]*v1.Pod, error) {
	if len(data) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(data), MaxManifestSize)
	}
	if err := scanJSON(data); err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidManifest, err)
	}
	if list.Kind != "PodList" {
		return nil, fmt.Errorf("%w: kind %q is not PodList", ErrInvalidManifest, list.Kind)
	}
	pods := make([]*v1.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if err := checkPodBounds(p); err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		var errs field.ErrorList
		meta := field.NewPath("metadata")
		if !IsSafePathSegment(string(p.UID)) || len(p.UID) > maxUIDLength {
			errs = append(errs, field.Invalid(meta.Child("uid"), string(p.UID), "must be usable as a single path segment"))
		}
		if !IsSafePathSegment(p.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), p.Name, "must be usable as a single path segment"))
		}
		errs = append(errs, podResourceNames(&p.Spec, field.NewPath("spec"))...)
		if len(errs) > 0 {
			return nil, fmt.Errorf("items[%d]: %w", i, &ValidationError{Errs: errs})
		}
		pods = append(pods, p)
	}
	return pods, nil
}

// podResourceNames checks the resource names of every resource list of a
// pod spec (containers of each kind, pod-level resources, overhead).
func podResourceNames(s *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(c *v1.Container, cp *field.Path) {
		errs = append(errs, validateResourceNames(c.Resources.Limits, cp.Child("resources", "limits"))...)
		errs = append(errs, validateResourceNames(c.Resources.Requests, cp.Child("resources", "requests"))...)
	}
	for i := range s.InitContainers {
		check(&s.InitContainers[i], p.Child("initContainers").Index(i))
	}
	for i := range s.Containers {
		check(&s.Containers[i], p.Child("containers").Index(i))
	}
	for i := range s.EphemeralContainers {
		c := v1.Container(s.EphemeralContainers[i].EphemeralContainerCommon)
		check(&c, p.Child("ephemeralContainers").Index(i))
	}
	if r := s.Resources; r != nil {
		errs = append(errs, validateResourceNames(r.Limits, p.Child("resources", "limits"))...)
		errs = append(errs, validateResourceNames(r.Requests, p.Child("resources", "requests"))...)
	}
	errs = append(errs, validateResourceNames(s.Overhead, p.Child("overhead"))...)
	return errs
}
