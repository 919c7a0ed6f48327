package fake

import (
	"maps"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The fake keeps private copies of what it is given and hands out copies of
// what it keeps, as a remote runtime would. The copies are made field by
// field rather than with proto.Clone: protobuf's reflection builds the
// descriptors of the whole CRI API the first time it runs (about 0.4 MB
// of heap and 1 MB of resident memory that an idle agent then keeps), and
// a reflective clone of a container's config is several times larger and
// slower than these. TestClonesCopyEveryField fills every field of each
// message with protobuf's reflection and fails when a field is not copied
// (a newer CRI API).

// sandboxConfig copies the parts of a sandbox's config the fake reads:
// the metadata, labels, annotations, log directory and namespace options.
func sandboxConfig(c *runtimeapi.PodSandboxConfig) *runtimeapi.PodSandboxConfig {
	out := &runtimeapi.PodSandboxConfig{
		Metadata:     sandboxMeta(c.GetMetadata()),
		LogDirectory: c.GetLogDirectory(),
		Labels:       maps.Clone(c.GetLabels()),
		Annotations:  maps.Clone(c.GetAnnotations()),
	}
	if o := c.GetLinux().GetSecurityContext().GetNamespaceOptions(); o != nil {
		out.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: cloneNamespaceOption(o),
		}}
	}
	return out
}

// containerConfig copies the parts of a container's config the fake reads:
// the metadata, image, command and args, labels, annotations, mounts, log
// path and Linux resources.
func containerConfig(c *runtimeapi.ContainerConfig) *runtimeapi.ContainerConfig {
	out := &runtimeapi.ContainerConfig{
		Image:       cloneImageSpec(c.GetImage()),
		Command:     slices.Clone(c.GetCommand()),
		Args:        slices.Clone(c.GetArgs()),
		Labels:      maps.Clone(c.GetLabels()),
		Annotations: maps.Clone(c.GetAnnotations()),
		LogPath:     c.GetLogPath(),
	}
	if m := c.GetMetadata(); m != nil {
		out.Metadata = &runtimeapi.ContainerMetadata{Name: m.Name, Attempt: m.Attempt}
	}
	if len(c.GetMounts()) > 0 {
		out.Mounts = make([]*runtimeapi.Mount, len(c.Mounts))
		for i, m := range c.Mounts {
			out.Mounts[i] = cloneMount(m)
		}
	}
	if r := c.GetLinux().GetResources(); r != nil {
		out.Linux = &runtimeapi.LinuxContainerConfig{Resources: cloneResources(r)}
	}
	return out
}

func cloneNamespaceOption(o *runtimeapi.NamespaceOption) *runtimeapi.NamespaceOption {
	if o == nil {
		return nil
	}
	out := &runtimeapi.NamespaceOption{Network: o.Network, Pid: o.Pid, Ipc: o.Ipc, TargetId: o.TargetId}
	if u := o.UsernsOptions; u != nil {
		out.UsernsOptions = &runtimeapi.UserNamespace{Mode: u.Mode, Uids: cloneIDMappings(u.Uids), Gids: cloneIDMappings(u.Gids)}
	}
	return out
}

func cloneIDMappings(in []*runtimeapi.IDMapping) []*runtimeapi.IDMapping {
	if in == nil {
		return nil
	}
	out := make([]*runtimeapi.IDMapping, len(in))
	for i, m := range in {
		if m != nil {
			out[i] = &runtimeapi.IDMapping{HostId: m.HostId, ContainerId: m.ContainerId, Length: m.Length}
		}
	}
	return out
}

func cloneImageSpec(s *runtimeapi.ImageSpec) *runtimeapi.ImageSpec {
	if s == nil {
		return nil
	}
	return &runtimeapi.ImageSpec{Image: s.Image, Annotations: maps.Clone(s.Annotations),
		UserSpecifiedImage: s.UserSpecifiedImage, RuntimeHandler: s.RuntimeHandler, ImageRef: s.ImageRef}
}

func cloneMount(m *runtimeapi.Mount) *runtimeapi.Mount {
	if m == nil {
		return nil
	}
	return &runtimeapi.Mount{
		ContainerPath:     m.ContainerPath,
		HostPath:          m.HostPath,
		Readonly:          m.Readonly,
		SelinuxRelabel:    m.SelinuxRelabel,
		Propagation:       m.Propagation,
		UidMappings:       cloneIDMappings(m.UidMappings),
		GidMappings:       cloneIDMappings(m.GidMappings),
		RecursiveReadOnly: m.RecursiveReadOnly,
		Image:             cloneImageSpec(m.Image),
		ImageSubPath:      m.ImageSubPath,
	}
}

func cloneResources(r *runtimeapi.LinuxContainerResources) *runtimeapi.LinuxContainerResources {
	if r == nil {
		return nil
	}
	out := &runtimeapi.LinuxContainerResources{
		CpuPeriod:              r.CpuPeriod,
		CpuQuota:               r.CpuQuota,
		CpuShares:              r.CpuShares,
		MemoryLimitInBytes:     r.MemoryLimitInBytes,
		OomScoreAdj:            r.OomScoreAdj,
		CpusetCpus:             r.CpusetCpus,
		CpusetMems:             r.CpusetMems,
		Unified:                maps.Clone(r.Unified),
		MemorySwapLimitInBytes: r.MemorySwapLimitInBytes,
	}
	if r.HugepageLimits != nil {
		out.HugepageLimits = make([]*runtimeapi.HugepageLimit, len(r.HugepageLimits))
		for i, h := range r.HugepageLimits {
			if h != nil {
				out.HugepageLimits[i] = &runtimeapi.HugepageLimit{PageSize: h.PageSize, Limit: h.Limit}
			}
		}
	}
	return out
}

func cloneAuth(a *runtimeapi.AuthConfig) *runtimeapi.AuthConfig {
	if a == nil {
		return nil
	}
	return &runtimeapi.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
		ServerAddress: a.ServerAddress, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
}
