package nodeshutdown

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

// StateFileName is the name of the state file in Config.StateDir: the
// kubelet's, which keeps it in its root directory.
const StateFileName = "graceful_node_shutdown_state"

// stateFileMode is the state file's mode: the kubelet's, which any user
// may read (it holds two times).
const stateFileMode = 0o644

// maxStateSize bounds the state file read back: the kubelet's is about
// 80 bytes.
const maxStateSize = 4096

// State is what the state file holds, in the kubelet's format
// ({"startTime": ..., "endTime": ...}, RFC 3339 times): when the last
// graceful shutdown started and when it ended. A zero EndTime means the
// shutdown did not finish (the agent stopped, Shutdown's ctx ended, or
// the power went first: see "The state file" in the package
// documentation); a zero State, that no shutdown was recorded.
type State struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// statePath is the state file's path ("" when none is kept).
func (m *Manager) statePath() string {
	if m.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(m.cfg.StateDir, StateFileName)
}

// LoadState reads the state file a previous run left in Config.StateDir
// and sets the gauges from it (a zero time leaves its gauge at 0), as the
// kubelet does when it starts: after a reboot the metrics tell when the
// last graceful shutdown began and ended. Run calls it first; a program
// that calls only Shutdown calls it once before. Once a shutdown has
// started in this process the gauges are left to it.
//
// No StateDir or no file is no error (a zero State). A file that cannot
// be read, or does not hold the kubelet's JSON with sensible times (a
// truncated or garbled file, a time before 1970, an end without a start
// or before it), is an error naming the file and what is wrong (wrapping
// ErrStateCorrupt when the content is bad); the gauges then stay at 0.
// A corrupt file, or anything else in its place (a directory, a FIFO, a
// symbolic link), is set aside as StateFileName.corrupt (or .corrupt.N),
// so that the next shutdown can write the file; the error says where it
// went, or why it could not be moved.
func (m *Manager) LoadState() (State, error) {
	path := m.statePath()
	if path == "" {
		return State{}, nil
	}
	s, err := readState(path)
	if errors.Is(err, ErrStateCorrupt) {
		if dst, serr := checkpoint.SetAside(m.cfg.StateDir, StateFileName); serr != nil {
			err = fmt.Errorf("%w (not set aside: %w)", err, serr)
		} else {
			err = fmt.Errorf("%w (set aside as %s)", err, dst)
		}
	}
	if err != nil {
		return State{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recorded || m.startTime == nil {
		return s, nil
	}
	if !s.StartTime.IsZero() {
		m.startTime.Set(float64(s.StartTime.Unix()))
	}
	if !s.EndTime.IsZero() {
		m.endTime.Set(float64(s.EndTime.Unix()))
	}
	return s, nil
}

// readState reads and checks the state file at path; a missing file is a
// zero State.
func readState(path string) (State, error) {
	// checkpoint's read opens without following a symbolic link and
	// refuses anything but a regular file, so a FIFO cannot block it; a
	// file over maxStateSize is refused from its size, and no more than
	// maxStateSize+1 bytes are read, so a hostile large file is not read.
	b, err := checkpoint.OS{}.ReadFileMax(path, maxStateSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return State{}, nil
	case errors.Is(err, checkpoint.ErrCorrupt), errors.Is(err, checkpoint.ErrTooLarge):
		return State{}, fmt.Errorf("%w: %s: %w", ErrStateCorrupt, path, err)
	case err != nil:
		return State{}, fmt.Errorf("nodeshutdown: read state file %s: %w", path, err)
	}
	s, err := decodeState(b)
	if err != nil {
		return State{}, fmt.Errorf("%w: %s: %w", ErrStateCorrupt, path, err)
	}
	return s, nil
}

// decodeState parses and checks the state file's bytes (at most
// maxStateSize: readState's read refuses more). A time of 1970 or later
// in the future is accepted: an appliance may have booted with its clock
// behind.
func decodeState(b []byte) (State, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return State{}, errors.New("empty file")
	}
	if t[0] != '{' {
		return State{}, errors.New("not a JSON object")
	}
	var s State
	if err := json.Unmarshal(t, &s); err != nil {
		return State{}, fmt.Errorf("not the state's JSON: %w", err)
	}
	epoch := time.Unix(0, 0)
	switch {
	case !s.StartTime.IsZero() && s.StartTime.Before(epoch):
		return State{}, fmt.Errorf("startTime %s is before 1970", s.StartTime.Format(time.RFC3339))
	case !s.EndTime.IsZero() && s.EndTime.Before(epoch):
		return State{}, fmt.Errorf("endTime %s is before 1970", s.EndTime.Format(time.RFC3339))
	case s.StartTime.IsZero() && !s.EndTime.IsZero():
		return State{}, fmt.Errorf("endTime %s without a startTime", s.EndTime.Format(time.RFC3339))
	case !s.EndTime.IsZero() && s.EndTime.Before(s.StartTime):
		return State{}, fmt.Errorf("endTime %s is before startTime %s", s.EndTime.Format(time.RFC3339), s.StartTime.Format(time.RFC3339))
	}
	return s, nil
}

// storeState writes s to the state file, atomically; a failure is logged
// and does not stop the shutdown.
func (m *Manager) storeState(s State) {
	path := m.statePath()
	if path == "" {
		return
	}
	s.StartTime, s.EndTime = s.StartTime.UTC(), s.EndTime.UTC()
	b, err := json.Marshal(s)
	if err == nil {
		err = checkpoint.WritePlain(m.cfg.StateDir, StateFileName, b, stateFileMode)
	}
	if err != nil {
		m.log.Error("graceful shutdown state not stored: after a restart the shutdown gauges will not show this shutdown",
			zap.String("file", path), zap.Error(err))
	}
}
