package cmwire

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// runtimeConfigSource is the optional CRI RuntimeConfig call of a CRI
// (containerd 2.x and runtime/fake answer it; containerd 1.6 answers
// Unimplemented).
type runtimeConfigSource interface {
	RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error)
}

// cgroupDriverUser is the part of *containermgr.Manager that picks the
// cgroup driver before it starts.
type cgroupDriverUser interface {
	CgroupDriver() containermgr.Driver
	SetCgroupDriver(d containermgr.Driver) error
}

// adoptRuntimeCgroupDriver makes m use the cgroup driver the runtime reports
// in RuntimeConfig, as the kubelet does since 1.28 (KubeletCgroupDriverFromCRI):
// a pod's cgroup must be spelled the way the runtime places sandboxes. When
// the configured driver differs it logs one warning (this runs once per
// Agent.Run, before the container manager starts). A runtime that does not
// report a driver (containerd 1.6: Unimplemented) leaves the configured one.
func adoptRuntimeCgroupDriver(ctx context.Context, cri any, m cgroupDriverUser, log *zap.Logger) error {
	src, ok := cri.(runtimeConfigSource)
	if !ok {
		return nil
	}
	configured := m.CgroupDriver()
	resp, err := src.RuntimeConfig(ctx)
	switch {
	case err != nil && (status.Code(err) == codes.Unimplemented || errors.Is(err, remote.ErrUnimplemented)):
		log.Info("the runtime does not report its cgroup driver (no CRI RuntimeConfig): using the configured one",
			zap.String("cgroupDriver", string(configured)))
		return nil
	case err != nil:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("cannot read the runtime's cgroup driver (CRI RuntimeConfig): using the configured one",
			zap.String("cgroupDriver", string(configured)), zap.Error(err))
		return nil
	case resp.GetLinux() == nil:
		return nil
	}
	var reported containermgr.Driver
	switch resp.GetLinux().GetCgroupDriver() {
	case runtimeapi.CgroupDriver_SYSTEMD:
		reported = containermgr.DriverSystemd
	case runtimeapi.CgroupDriver_CGROUPFS:
		reported = containermgr.DriverCgroupfs
	default:
		log.Warn("the runtime reports an unknown cgroup driver: using the configured one",
			zap.Stringer("reported", resp.GetLinux().GetCgroupDriver()), zap.String("cgroupDriver", string(configured)))
		return nil
	}
	if reported == configured {
		log.Info("using the cgroup driver the runtime reports", zap.String("cgroupDriver", string(reported)))
		return nil
	}
	if err := m.SetCgroupDriver(reported); err != nil {
		return err
	}
	log.Warn("the configured cgroup driver differs from the runtime's: using the runtime's",
		zap.String("configured", string(configured)), zap.String("runtime", string(reported)))
	return nil
}
