package kuberuntime

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// deadInstance is one exited container instance of a pod.
type deadInstance struct {
	gcContainer
	attempt uint32
}

// RemoveDeadContainers removes exited instances of one pod's containers at
// once, keeping the newest keep of each container name (keep 0 removes
// them all), with their log files. It is what the sync loop calls when the
// PLEG reports a container dead, as the kubelet's pod container deletor
// does: a crash-looping container's older instances go at its next death
// instead of at the next container GC.
//
// With containerID set, only the instances that have the same name as that
// container are considered; a containerID the runtime no longer lists, or
// one that is not the pod's, removes nothing. With containerID empty, every
// container name of the pod is.
//
// Only exited containers are removed: a running, created or unknown one is
// left alone (the pod worker and container GC deal with those), and so is
// every container without the pod's UID label (it asks the runtime for the
// pod's objects with a label selector and checks the UID again on what
// comes back). Instances are ordered newest first by creation time, then by
// attempt (the restart count each was created with), then by id.
//
// Restart counts stay right with keep >= 1: the restart count of a
// container's next instance is read from the newest instance's annotation
// (SyncPod), and the newest exited instance is kept, as is any newer one
// that is not exited; the API status keeps its own count and last state.
// Errors are joined; a failure on one container does not stop the others,
// and container GC retries what is left. A negative keep is an error
// wrapping ErrInvalidArgument.
func (m *Manager) RemoveDeadContainers(ctx context.Context, uid types.UID, containerID string, keep int) error {
	if keep < 0 {
		return fmt.Errorf("%w: remove dead containers of pod %s: keep (%d) is negative", ErrInvalidArgument, uid, keep)
	}
	containers, err := m.listPodContainers(ctx, uid)
	if err != nil {
		return fmt.Errorf("runtime: remove dead containers of pod %s: list containers: %w", uid, err)
	}
	only, filtered := "", containerID != ""
	if filtered {
		i := slices.IndexFunc(containers, func(c *runtimeapi.Container) bool { return c.GetId() == containerID })
		if i < 0 {
			return nil // gone already, or not this pod's
		}
		only = containerName(containers[i].GetLabels(), containers[i].GetMetadata())
	}
	byName := make(map[string][]deadInstance)
	for _, c := range containers {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		name := containerName(c.GetLabels(), c.GetMetadata())
		if filtered && name != only {
			continue
		}
		byName[name] = append(byName[name], deadInstance{
			gcContainer: gcContainer{id: c.GetId(), name: name, created: c.GetCreatedAt()},
			attempt:     c.GetMetadata().GetAttempt(),
		})
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var errs []error
	for _, n := range names {
		cs := byName[n]
		if len(cs) <= keep {
			continue
		}
		slices.SortFunc(cs, func(a, b deadInstance) int {
			return cmp.Or(cmp.Compare(b.created, a.created), cmp.Compare(b.attempt, a.attempt), cmp.Compare(a.id, b.id))
		})
		for _, c := range cs[keep:] {
			if err := m.gcRemoveContainer(ctx, c.gcContainer); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
