package eviction

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// StatsProvider is what the manager needs from a stats source (cgroups,
// statfs, CRI stats). It is called once per cycle, and again after
// node-level reclaim.
type StatsProvider interface {
	Summary(ctx context.Context) (*Summary, error)
}

// Summary is one observation of the node and its pods.
type Summary struct {
	// Time the stats were taken; a zero Time counts as always fresh. The
	// manager acts on a threshold only when its stats are newer than the
	// last cycle's.
	Time time.Time
	// Memory is the node's memory; nil means not observed.
	Memory *MemoryStats
	// AllocatableMemory is the pods cgroup's memory (capacity is the node's
	// allocatable memory); nil means not observed.
	AllocatableMemory *MemoryStats
	// NodeFs is the file system holding the kubelet root, logs and volumes.
	NodeFs *FsStats
	// ImageFs, when set, is a dedicated image file system; nil means images
	// share NodeFs.
	ImageFs *FsStats
	// ContainerFs, when set, holds writable container layers apart from
	// ImageFs; nil means it is ImageFs (or NodeFs).
	ContainerFs *FsStats
	// PID is the node's process table; nil means not observed.
	PID *PIDStats
	// Pods holds the usage of each pod; a pod missing here ranks first.
	Pods []PodStats
}

// MemoryStats is memory available and in use; capacity is their sum.
type MemoryStats struct {
	AvailableBytes  uint64
	WorkingSetBytes uint64
}

// FsStats is a file system's free space and inodes.
type FsStats struct {
	AvailableBytes uint64
	CapacityBytes  uint64
	InodesFree     uint64
	Inodes         uint64
}

// PIDStats is the node's process table.
type PIDStats struct {
	MaxPID       uint64
	NumProcesses uint64
}

// PodStats is one pod's usage.
type PodStats struct {
	UID                   types.UID
	MemoryWorkingSetBytes uint64
	Processes             uint64
	// Disk use: writable layers (rootfs), logs, and local volumes (emptyDir
	// and the like), in bytes and inodes.
	RootfsBytes, LogsBytes, VolumeBytes    uint64
	RootfsInodes, LogsInodes, VolumeInodes uint64
	Containers                             []ContainerStats
	// Volumes is the use of each measured local volume (emptyDir), by
	// volume name, for the emptyDir sizeLimit check; VolumeBytes is
	// their sum.
	Volumes []VolumeStats
}

// VolumeStats is one local volume's use.
type VolumeStats struct {
	Name              string
	UsedBytes, Inodes uint64
}

// ContainerStats is one container's usage, for the eviction message.
type ContainerStats struct {
	Name                  string
	MemoryWorkingSetBytes uint64
	RootfsBytes           uint64
	LogsBytes             uint64
}
