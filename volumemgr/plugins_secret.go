package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type secretPlugin struct{ cfg *pluginsConfig }

func (*secretPlugin) Name() string                   { return "" }
func (*secretPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*secretPlugin) RequiresRemount() bool          { return false }
func (*secretPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*secretPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*secretPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
