package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type emptyDirPlugin struct{ cfg *pluginsConfig }

func (*emptyDirPlugin) Name() string                   { return "" }
func (*emptyDirPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*emptyDirPlugin) RequiresRemount() bool          { return false }
func (*emptyDirPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*emptyDirPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*emptyDirPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
