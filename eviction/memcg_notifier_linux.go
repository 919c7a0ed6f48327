//go:build linux

package eviction

import (
	"context"
	bin "encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// memcgRegister creates a non-blocking eventfd and registers it with the
// v1 memory cgroup dir for memory.usage_in_bytes crossing usage. The
// caller owns the returned fd.
func memcgRegister(dir string, usage int64) (int, error) {
	watchPath := filepath.Join(dir, "memory.usage_in_bytes")
	watch, err := unix.Open(watchPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: open %s: %w", ErrMemcgNotifier, watchPath, err)
	}
	defer unix.Close(watch)
	controlPath := filepath.Join(dir, "cgroup.event_control")
	control, err := unix.Open(controlPath, unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("%w: open %s: %w", ErrMemcgNotifier, controlPath, err)
	}
	defer unix.Close(control)
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("%w: eventfd: %w", ErrMemcgNotifier, err)
	}
	line := strconv.Itoa(efd) + " " + strconv.Itoa(watch) + " " + strconv.FormatInt(usage, 10)
	if _, err := unix.Write(control, []byte(line)); err != nil {
		unix.Close(efd)
		return -1, fmt.Errorf("%w: write %q to %s: %w", ErrMemcgNotifier, line, controlPath, err)
	}
	return efd, nil
}

func memcgClose(fd int) { _ = unix.Close(fd) }

// memcgWake signals eventfd fd (nothing when fd < 0).
func memcgWake(fd int) {
	if fd < 0 {
		return
	}
	var one [8]byte
	bin.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(fd, one[:])
}

func memcgEpollAdd(epfd, fd int) error {
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
}

// memcgDrain reads an eventfd's counter; 0 when it was not signalled.
func memcgDrain(fd int) (uint64, error) {
	var buf [8]byte
	for {
		_, err := unix.Read(fd, buf[:])
		switch {
		case err == nil:
			return bin.NativeEndian.Uint64(buf[:]), nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return 0, nil
		default:
			return 0, err
		}
	}
}

// runEventfd waits on the registered eventfd (and a wake-up eventfd that
// ctx's end signals) until ctx is done.
func (n *MemcgNotifier) runEventfd(ctx context.Context, trigger func()) (err error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("%w: epoll_create1: %w", ErrMemcgNotifier, err)
	}
	defer unix.Close(epfd)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("%w: eventfd: %w", ErrMemcgNotifier, err)
	}
	defer unix.Close(wake)
	if err := memcgEpollAdd(epfd, wake); err != nil {
		return fmt.Errorf("%w: epoll_ctl: %w", ErrMemcgNotifier, err)
	}
	n.mu.Lock()
	if n.efd >= 0 {
		if err := memcgEpollAdd(epfd, n.efd); err != nil {
			n.mu.Unlock()
			return fmt.Errorf("%w: epoll_ctl: %w", ErrMemcgNotifier, err)
		}
	}
	n.epfd, n.wake = epfd, wake
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.epfd, n.wake = -1, -1
		n.disarmLocked()
		n.mu.Unlock()
	}()

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-ctx.Done():
			memcgWake(wake)
		case <-done:
		}
	})
	defer wg.Wait()
	defer close(done)

	events := make([]unix.EpollEvent, 4)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n.mu.Lock()
		pending := n.pending
		n.pending = false
		n.mu.Unlock()
		if pending {
			n.log.Debug("crossed while re-arming")
			trigger()
		}
		k, err := unix.EpollWait(epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: epoll_wait: %w", ErrMemcgNotifier, err)
		}
		fired := false
		for _, ev := range events[:k] {
			fd := int(ev.Fd)
			if fd == wake {
				_, _ = memcgDrain(wake)
				continue
			}
			// The fd may have been replaced by UpdateThreshold since
			// epoll_wait returned: only the current one counts, and only
			// when its counter was set.
			n.mu.Lock()
			if fd == n.efd {
				c, err := memcgDrain(fd)
				if err != nil {
					n.log.Warn("reading the memcg eventfd", zap.Error(err))
				}
				if c > 0 {
					fired = true
					if cur, err := memcgReadUint(filepath.Join(n.dir(1), "memory.usage_in_bytes")); err == nil {
						n.v1Over = cur >= uint64(n.usage)
					}
				}
			}
			n.mu.Unlock()
		}
		if fired {
			n.log.Debug("crossed")
			trigger()
		}
	}
}
