package fake

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AppendLog makes a running container print text on stream, as if its
// process wrote it: the text goes to every attach session of the
// container (fakestream) and to its log file, at its CRI log path (the
// sandbox's LogDirectory joined with the container's LogPath), in the CRI
// log format as containerd writes it: each line of text ending in a
// newline is one full record (F) stamped with the injected clock, a last
// piece without one a partial record (P). The file is opened on the first
// write and kept open, so a log renamed by a rotation keeps receiving lines
// until ReopenContainerLog, as with a real runtime; its directory is made
// if missing, as containerd does. A container without a log path prints to
// its sessions only. A container not running, or a stream other than
// stdout and stderr, is an error. It is a test hook, not a CRI call.
func (r *Runtime) AppendLog(containerID string, stream runtimeapi.LogStreamType, text string) error {
	if stream != runtimeapi.Stdout && stream != runtimeapi.Stderr {
		return coded(codes.InvalidArgument, ErrInvalidArgument, "AppendLog: stream %q: want stdout or stderr", stream)
	}
	// One AppendLog at a time: the file and the sessions see one order.
	r.logMu.Lock()
	defer r.logMu.Unlock()
	r.mu.Lock()
	c := r.lookupContainerLocked(containerID)
	if c == nil {
		r.mu.Unlock()
		return notFound("container", containerID)
	}
	now := r.nowNano()
	r.advanceLocked(c, now)
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return coded(codes.FailedPrecondition, ErrFailedPrecondition, "container %q is not running", c.id)
	}
	att := slices.Clone(r.attached[c.id])
	if c.logPath != "" {
		if err := r.writeLogLocked(c, stream, text, now); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	r.mu.Unlock()
	for _, a := range att {
		a.write(string(stream), []byte(text))
	}
	return nil
}

// writeLogLocked appends text to c's log file in the CRI log format.
func (r *Runtime) writeLogLocked(c *container, stream runtimeapi.LogStreamType, text string, now int64) error {
	if c.logFile == nil {
		if err := c.openLogLocked(); err != nil {
			return err
		}
	}
	ts := time.Unix(0, now).UTC().Format(time.RFC3339Nano)
	var b strings.Builder
	for text != "" {
		line, rest, full := strings.Cut(text, "\n")
		tag := " F "
		if !full {
			tag = " P "
		}
		b.WriteString(ts + " " + string(stream) + tag + line + "\n")
		text = rest
	}
	if _, err := c.logFile.WriteString(b.String()); err != nil {
		return fmt.Errorf("fake: AppendLog: %w", err)
	}
	return nil
}

func (c *container) openLogLocked() error {
	if err := os.MkdirAll(filepath.Dir(c.logPath), 0o755); err != nil {
		return fmt.Errorf("fake: container log directory: %w", err)
	}
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return fmt.Errorf("fake: open container log: %w", err)
	}
	c.logFile = f
	return nil
}

// reopenLogLocked is ReopenContainerLog's work: the log file AppendLog
// opened is closed and a new one is created at the log path. Without one
// nothing happens (a test that never writes logs makes no files).
func (c *container) reopenLogLocked() error {
	if c.logFile == nil {
		return nil
	}
	c.closeLogLocked()
	return c.openLogLocked()
}

func (c *container) closeLogLocked() {
	if c.logFile != nil {
		c.logFile.Close()
		c.logFile = nil
	}
}
