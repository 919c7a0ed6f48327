package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type projectedPlugin struct{ cfg *pluginsConfig }

func (*projectedPlugin) Name() string                   { return "" }
func (*projectedPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*projectedPlugin) RequiresRemount() bool          { return false }
func (*projectedPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*projectedPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*projectedPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
