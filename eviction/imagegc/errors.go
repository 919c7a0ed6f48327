package imagegc

import (
	"errors"
	"fmt"

	"github.com/nodekit/nodekit/lifecycle"
)

// Sentinel errors. Errors returned by this package wrap one of these with %w;
// match them with errors.Is.
var (
	// ErrInvalidConfig: a Config field is invalid; the wrapping error names
	// the field.
	ErrInvalidConfig = errors.New("imagegc: invalid config")
	// ErrNotEnoughFreed: GarbageCollect found the image file system above
	// the high threshold and could not free enough to get down to the low
	// one. The error is a *FreeSpaceError saying how much it freed and how
	// much it needed.
	ErrNotEnoughFreed = errors.New("imagegc: not enough disk space freed")
	// ErrFsStats: the image file system's capacity and free space could not
	// be read, or make no sense (capacity 0).
	ErrFsStats = errors.New("imagegc: image file system stats unavailable")
	// ErrRuntime: the image service or the in-use lister failed.
	ErrRuntime = errors.New("imagegc: runtime call failed")
	// ErrAlreadyRan: Run was called before on this value (concurrently or
	// after it returned); each value runs at most once. It is the same
	// value as lifecycle.ErrAlreadyRan.
	ErrAlreadyRan = lifecycle.ErrAlreadyRan
)

// FreeSpaceError is returned by GarbageCollect when the image file system
// stays above the low threshold after every image it may remove is gone.
// It wraps ErrNotEnoughFreed.
type FreeSpaceError struct {
	// UsagePercent is the image file system's usage before the collection.
	UsagePercent int
	// CapacityBytes is the image file system's size.
	CapacityBytes uint64
	// NeededBytes is what had to be freed to get down to the low threshold;
	// FreedBytes what removing images freed.
	NeededBytes, FreedBytes uint64
}

func (e *FreeSpaceError) Error() string {
	return fmt.Sprintf("%v: the image file system is %d%% used of %d bytes; removing unused images freed %d of the %d bytes needed (the rest is held by images in use, pinned or too young, or by logs, volumes and other data)",
		ErrNotEnoughFreed, e.UsagePercent, e.CapacityBytes, e.FreedBytes, e.NeededBytes)
}

// Unwrap returns ErrNotEnoughFreed.
func (e *FreeSpaceError) Unwrap() error { return ErrNotEnoughFreed }
