package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type hostPathPlugin struct{ cfg *pluginsConfig }

func (*hostPathPlugin) Name() string                   { return "" }
func (*hostPathPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*hostPathPlugin) RequiresRemount() bool          { return false }
func (*hostPathPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*hostPathPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*hostPathPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
