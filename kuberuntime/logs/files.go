package logs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The names a rotation gives a log file, as the kubelet's: the live log
// <log> is renamed <log>.<timestamp>, compressed to <log>.<timestamp>.gz
// through <log>.<timestamp>.gz.tmp.
const (
	timestampFormat = "20060102-150405"
	gzSuffix        = ".gz"
	tmpSuffix       = ".tmp"
)

// rotatedFile is one file of a log's rotation set.
type rotatedFile struct {
	name  string // base name
	stamp string // the timestamp part
	gz    bool
	tmp   bool
}

// parseRotated reports whether name is base's rotated file and what kind.
func parseRotated(base, name string) (rotatedFile, bool) {
	rest, ok := strings.CutPrefix(name, base+".")
	if !ok {
		return rotatedFile{}, false
	}
	f := rotatedFile{name: name}
	rest, f.tmp = strings.CutSuffix(rest, tmpSuffix)
	rest, f.gz = strings.CutSuffix(rest, gzSuffix)
	if !validStamp(rest) {
		return rotatedFile{}, false
	}
	f.stamp = rest
	return f, true
}

// validStamp: s is 8 digits, '-', 6 digits.
func validStamp(s string) bool {
	if len(s) != len(timestampFormat) || s[8] != '-' {
		return false
	}
	for i := range len(s) {
		if i != 8 && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// listRotated lists the rotated files of the log at path (tmp leftovers
// included), oldest first.
func listRotated(path string) ([]rotatedFile, error) {
	dir, base := filepath.Split(path)
	entries, err := os.ReadDir(filepath.Clean(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("logs: list %s: %w", dir, err)
	}
	var out []rotatedFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if f, ok := parseRotated(base, e.Name()); ok {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b rotatedFile) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// usable drops tmp leftovers and the uncompressed twin of a compressed
// file (a compression that finished its rename but not the removal): what
// is left is each rotation's one complete file, oldest first.
func usable(fs []rotatedFile) []rotatedFile {
	gz := make(map[string]bool)
	for _, f := range fs {
		if f.gz && !f.tmp {
			gz[f.stamp] = true
		}
	}
	var out []rotatedFile
	for _, f := range fs {
		if f.tmp || (!f.gz && gz[f.stamp]) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Files lists the log files of the container log at path, oldest first:
// its rotated files (compressed or not) and then path itself. Leftovers
// of an interrupted compression are not listed. path need not exist.
func Files(path string) ([]string, error) {
	fs, err := listRotated(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	var out []string
	for _, f := range usable(fs) {
		out = append(out, filepath.Join(dir, f.name))
	}
	return append(out, path), nil
}

// Remove deletes the container log at path and every rotated file of it
// (the kubelet does so when it removes a dead container). Missing files
// are no error.
func Remove(path string) error {
	fs, err := listRotated(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	var errs []error
	for _, f := range fs {
		if err := os.Remove(filepath.Join(dir, f.name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("logs: %w", err))
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("logs: %w", err))
	}
	return errors.Join(errs...)
}
