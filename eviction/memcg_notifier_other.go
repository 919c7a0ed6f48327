//go:build !linux

package eviction

import (
	"context"
	"errors"
	"fmt"
)

// Cgroup v1 eventfd thresholds exist only on Linux; elsewhere the v1 path
// reports ErrUnsupported and Run returns at once. (v2 polling is plain
// file reads and works anywhere.)

func memcgRegister(dir string, _ int64) (int, error) {
	return -1, fmt.Errorf("%w: %s: cgroup v1 memory thresholds: %w", ErrMemcgNotifier, dir, errors.ErrUnsupported)
}

func memcgClose(int) {}

func memcgWake(int) {}

func memcgDrain(int) (uint64, error) { return 0, nil }

func memcgEpollAdd(int, int) error { return errors.ErrUnsupported }

func (n *MemcgNotifier) runEventfd(context.Context, func()) error {
	return fmt.Errorf("%w: cgroup v1 memory thresholds: %w", ErrMemcgNotifier, errors.ErrUnsupported)
}
