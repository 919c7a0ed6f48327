package volumemgr

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

type configMapPlugin struct{ cfg *pluginsConfig }

func (*configMapPlugin) Name() string                   { return "" }
func (*configMapPlugin) CanSupport(vol *v1.Volume) bool { return false }
func (*configMapPlugin) RequiresRemount() bool          { return false }
func (*configMapPlugin) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume, dir string) error {
	return nil
}
func (*configMapPlugin) TearDown(ctx context.Context, dir string) error { return nil }
func (*configMapPlugin) HostPath(pod *v1.Pod, vol *v1.Volume, dir string) (string, error) {
	return dir, nil
}
