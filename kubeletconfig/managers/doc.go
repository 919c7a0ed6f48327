// Package managers maps the cgroup, CPU and memory manager and eviction
// fields of a KubeletConfiguration (package kubeletconfig) to nodekit's
// container manager, CPU manager, memory manager and eviction with image
// GC, for an agent that runs its pods in cgroups on the host. It is a
// kubeletconfig.Part of its own, so that an agent that reads a
// configuration file without managing cgroups (the fake runtime) does not
// link those parts.
//
//	applied, err := kubeletconfig.Apply(b, file.Config, kubeletconfig.Options{
//		Runtime: true,
//		Parts:   []kubeletconfig.Part{managers.Part(managers.Options{StateDir: root})},
//	})
package managers
