package volumemgr

import (
	"fmt"
	"strings"
)

// Limits on paths written into or resolved beneath a volume dir (the
// kubelet's atomic writer limits).
const (
	// MaxPathLength is the longest item path or subPath accepted.
	MaxPathLength = 4096
	// MaxSegmentLength is the longest single path segment accepted.
	MaxSegmentLength = 255
)

// ValidateSegment checks that name is one safe path segment: not empty, not
// "." or "..", no '/', no NUL, at most MaxSegmentLength bytes. Volume names
// and pod UIDs are checked with it before they become part of a path.
func ValidateSegment(name string) error {
	if err := checkSegment(name); err != nil {
		return fmt.Errorf("%w: %q: %s", ErrUnsafePath, truncForError(name), err.Error())
	}
	return nil
}

// ValidateItemPath checks a relative path a configMap, secret, downwardAPI
// or projected item (or a key used as a file name) is written to: relative,
// not empty, at most MaxPathLength bytes, segments valid for ValidateSegment
// (so no "..", ".", empty segment, NUL), and the first segment does not
// start with ".." (names like "..data" are the writer's own).
func ValidateItemPath(p string) error {
	if err := checkRelPath(p); err != nil {
		return fmt.Errorf("%w: item path %q: %s", ErrUnsafePath, truncForError(p), err.Error())
	}
	first, _, _ := strings.Cut(p, "/")
	if strings.HasPrefix(first, "..") {
		return fmt.Errorf("%w: item path %q: must not start with '..'", ErrUnsafePath, truncForError(p))
	}
	return nil
}

// ValidateSubPath checks a volumeMount's subPath: relative, not empty, at
// most MaxPathLength bytes, every segment a valid ValidateSegment. Unlike
// item paths, segments may start with ".." (e.g. "..data/x") as long as
// none is "..". It only rejects what is unsafe on its face; symlinks are
// handled when the path is resolved (PrepareSubPath).
func ValidateSubPath(p string) error {
	if err := checkRelPath(p); err != nil {
		return fmt.Errorf("%w: subPath %q: %s", ErrUnsafePath, truncForError(p), err.Error())
	}
	return nil
}

func checkRelPath(p string) error {
	switch {
	case p == "":
		return errString("must not be empty")
	case len(p) > MaxPathLength:
		return errString(fmt.Sprintf("longer than %d bytes", MaxPathLength))
	case p[0] == '/':
		return errString("must be a relative path")
	}
	for rest := p; ; {
		seg, tail, more := strings.Cut(rest, "/")
		if err := checkSegment(seg); err != nil {
			return err
		}
		if !more {
			return nil
		}
		rest = tail
	}
}

func checkSegment(s string) error {
	switch {
	case s == "":
		return errString("empty path segment")
	case s == ".":
		return errString("must not contain '.' segments")
	case s == "..":
		return errString("must not contain '..'")
	case len(s) > MaxSegmentLength:
		return errString(fmt.Sprintf("segment longer than %d bytes", MaxSegmentLength))
	case strings.IndexByte(s, 0) >= 0:
		return errString("must not contain NUL")
	case strings.IndexByte(s, '/') >= 0:
		return errString("must not contain '/'")
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

// truncForError bounds user input echoed in error messages.
func truncForError(s string) string {
	const limit = 128
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}
