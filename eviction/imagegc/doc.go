// Package imagegc is nodekit's image garbage collector: it frees the image
// file system by removing images no container uses, least recently used
// first, as the kubelet's image GC manager does.
//
//	gc, err := imagegc.New(imagegc.Config{
//		Images: cri, // ListImages, RemoveImage, ImageFsInfo
//		InUse: imagegc.Union(
//			imagegc.Containers(cri),          // images of every container, running or dead
//			imagegc.Sandboxes(cri),           // images of every sandbox
//			imagegc.RuntimeSandboxImage(cri), // the pause image the runtime's verbose Status names
//		),
//	})
//	go gc.Run(ctx)            // detect now, GarbageCollect every 5m
//	evictionCfg.ImageGC = gc  // DeleteUnusedImages under disk pressure
//
// The manager remembers when it first saw each image and when it last saw
// one in use (DetectImages). GarbageCollect acts when the image file
// system's usage is at or above HighThresholdPercent (85): it removes
// unused images, those never used and then those used longest ago first
// (ties: first seen first), until usage is down to LowThresholdPercent
// (80). Images first seen less than MinAge (2m) ago, images in use, images
// the runtime reports pinned and the configured sandbox image are never
// removed. The pause image needs no configuration: containerd 2.x pins
// it, containerd 1.6 names it ("sandboxImage") in its verbose CRI Status
// (RuntimeSandboxImage), and every sandbox's verbose status names its
// image (Sandboxes); nodekit's Builder uses all three. When it cannot free enough, GarbageCollect returns a
// *FreeSpaceError (errors.Is ErrNotEnoughFreed) with the bytes freed and
// needed. With MaxAge set, images not used for longer than MaxAge are
// removed on every collection whatever the usage, once the manager has
// existed for MaxAge. DeleteUnusedImages removes every removable image at
// once, whatever the usage: the eviction manager's disk reclaim
// (eviction.ImageGC).
//
// Usage is 100 - available*100/capacity, in whole percent (so 84.9% used
// counts as 85), from FsStats, by default statfs(2) on the file system the
// runtime's ImageFsInfo names.
package imagegc
