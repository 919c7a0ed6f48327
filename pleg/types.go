package pleg

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// Runtime is what a PLEG needs from the container runtime: kuberuntime.Manager
// satisfies it.
type Runtime interface {
	// GetPods lists the pods the runtime holds; all=false lists only ready
	// sandboxes and running containers (a PLEG always passes true).
	GetPods(ctx context.Context, all bool) ([]*kubetypes.Pod, error)
	// GetPodStatus returns the full status of one pod.
	GetPodStatus(ctx context.Context, uid types.UID, name, namespace string) (*kubetypes.PodStatus, error)
}
