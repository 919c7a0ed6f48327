package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type downwardAPIPlugin struct{ cfg *pluginsConfig }

func (*downwardAPIPlugin) Name() string                   { return "" }
func (*downwardAPIPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*downwardAPIPlugin) RequiresRemount() bool          { return false }
func (*downwardAPIPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*downwardAPIPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*downwardAPIPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
