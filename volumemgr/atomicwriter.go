package volumemgr

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"
)

const (
	dataDirName    = "..data"
	newDataDirName = "..data_tmp"
	// tsDirLayout names timestamped payload dirs: "..2006_01_02_15_04_05.<n>".
	tsDirLayout = "..2006_01_02_15_04_05."
	// maxFileSize caps one projected file (a Kubernetes object is ≤ 1.5 MiB
	// but a local ObjectSource might not be).
	maxFileSize = 64 << 20
)

// FileProjection is one file of an atomic writer payload.
type FileProjection struct {
	Data []byte
	// Mode holds the permission bits (0..0777).
	Mode fs.FileMode
	// FsUser, when set, owns the file (projected service account tokens).
	FsUser *int64
	// FsGroup, when set, group-owns the file (pod fsGroup).
	FsGroup *int64
}

// AtomicWriter projects a set of files into a volume dir so that readers see
// either the old or the new set, never a mix:
//
//	<dir>/..2024_01_02_15_04_05.123  the payload (timestamped dir)
//	<dir>/..data -> ..2024_01_02_15_04_05.123
//	<dir>/<top> -> ..data/<top>     one symlink per top-level path
//
// Every operation is made relative to a descriptor of dir opened once, with
// symlinks never followed (O_NOFOLLOW per component, openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS for nested reads), so a dir pre-seeded
// with symlinks (..data -> /etc, a user-visible name pointing outside, a
// timestamped dir that is a symlink) can't make it write, chmod or delete
// anything outside dir.
type AtomicWriter struct {
	dir    string
	clock  clock.Clock
	logger *zap.Logger
}

// WriteStats reports what one Write did.
type WriteStats struct {
	// Changed: a new timestamped dir was written and swapped in.
	Changed bool
	// LinksFixed counts user-visible symlinks created or repaired.
	LinksFixed int
	// Removed counts user-visible paths removed (no longer in the payload,
	// or in the way).
	Removed int
}

// NewAtomicWriter returns a writer for dir (which must exist when Write is
// called). clk stamps the payload dirs; nil clk and logger get defaults.
func NewAtomicWriter(dir string, clk clock.Clock, logger *zap.Logger) *AtomicWriter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	return &AtomicWriter{dir: dir, clock: clk, logger: logger}
}

// Write makes the content of dir match payload (paths relative to dir,
// checked with ValidateItemPath). When the current content already matches
// (bytes, modes, owners, set of files, user-visible links) nothing is
// written at all.
func (w *AtomicWriter) Write(payload map[string]FileProjection) (WriteStats, error) {
	var st WriteStats
	paths, err := checkPayload(payload)
	if err != nil {
		return st, err
	}
	root, err := openDirNoFollow(unix.AT_FDCWD, w.dir)
	if err != nil {
		return st, fmt.Errorf("atomic writer: open volume dir %s: %w", w.dir, err)
	}
	defer unix.Close(root)

	tops := topLevel(paths)

	// The current payload, if ..data is a symlink to a real timestamped dir.
	oldTs := currentTsDir(root)
	write := true
	if oldTs != "" {
		same, err := sameContent(root, oldTs, payload)
		if err != nil {
			w.logger.Debug("comparing current payload", zap.String("dir", w.dir), zap.Error(err))
		}
		write = !same
	}

	if write {
		newTs, err := w.writeTsDir(root, paths, payload)
		if err != nil {
			return st, err
		}
		if err := swapDataLink(root, newTs); err != nil {
			_ = removeAllAt(root, newTs)
			return st, fmt.Errorf("atomic writer %s: %w", w.dir, err)
		}
		st.Changed = true
	}

	// User-visible top-level links.
	for _, top := range tops {
		fixed, err := ensureLink(root, top, dataDirName+"/"+top)
		if err != nil {
			return st, fmt.Errorf("atomic writer %s: link %q: %w", w.dir, top, err)
		}
		if fixed {
			st.LinksFixed++
		}
	}

	// Remove links of paths no longer in the payload (only our own links:
	// symlinks pointing into ..data), and stale timestamped dirs.
	names, err := readDirNames(root)
	if err != nil {
		return st, fmt.Errorf("atomic writer %s: %w", w.dir, err)
	}
	cur := currentTsDir(root)
	wanted := make(map[string]bool, len(tops))
	for _, t := range tops {
		wanted[t] = true
	}
	for _, name := range names {
		switch {
		case name == dataDirName || name == cur:
		case name == newDataDirName || isTsDirName(name):
			if err := removeAllAt(root, name); err != nil {
				return st, fmt.Errorf("atomic writer %s: remove %q: %w", w.dir, name, err)
			}
		case !wanted[name]:
			target, err := readlinkAt(root, name)
			if err != nil || target != dataDirName+"/"+name {
				continue // not ours: leave it
			}
			if err := unix.Unlinkat(root, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return st, fmt.Errorf("atomic writer %s: remove %q: %w", w.dir, name, err)
			}
			st.Removed++
		}
	}
	return st, nil
}

// checkPayload validates paths and modes and returns the paths sorted.
func checkPayload(payload map[string]FileProjection) ([]string, error) {
	paths := make([]string, 0, len(payload))
	for p, fp := range payload {
		if err := ValidateItemPath(p); err != nil {
			return nil, err
		}
		if fp.Mode&^fs.ModePerm != 0 {
			return nil, fmt.Errorf("%w: item path %q: mode %#o outside 0..0777", ErrUnsafePath, p, uint32(fp.Mode))
		}
		if len(fp.Data) > maxFileSize {
			return nil, fmt.Errorf("%w: item path %q: %d bytes is more than %d", ErrUnsafePath, p, len(fp.Data), maxFileSize)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	// A path can't be both a file and a directory ("a" and "a/b").
	for i := 1; i < len(paths); i++ {
		if strings.HasPrefix(paths[i], paths[i-1]+"/") {
			return nil, fmt.Errorf("%w: item path %q is also a directory of %q", ErrUnsafePath, paths[i-1], paths[i])
		}
	}
	return paths, nil
}

func topLevel(sorted []string) []string {
	var out []string
	for _, p := range sorted {
		top, _, _ := strings.Cut(p, "/")
		if len(out) == 0 || out[len(out)-1] != top {
			out = append(out, top)
		}
	}
	// "a" < "a-b" < "a/b" in byte order, so tops may repeat non-adjacently.
	sort.Strings(out)
	return compactStrings(out)
}

func compactStrings(s []string) []string {
	if len(s) < 2 {
		return s
	}
	j := 1
	for i := 1; i < len(s); i++ {
		if s[i] != s[j-1] {
			s[j] = s[i]
			j++
		}
	}
	return s[:j]
}

func isTsDirName(name string) bool {
	return len(name) > 3 && strings.HasPrefix(name, "..") && name[2] >= '0' && name[2] <= '9'
}

// currentTsDir returns the name ..data points to when that is a timestamped
// dir name and a real directory (not a symlink) in root; else "".
func currentTsDir(root int) string {
	target, err := readlinkAt(root, dataDirName)
	if err != nil || !isTsDirName(target) || strings.ContainsRune(target, '/') {
		return ""
	}
	var st unix.Stat_t
	if err := unix.Fstatat(root, target, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return ""
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return ""
	}
	return target
}

// sameContent reports whether ts (a dir in root) holds exactly payload.
func sameContent(root int, ts string, payload map[string]FileProjection) (bool, error) {
	tsfd, err := openDirNoFollow(root, ts)
	if err != nil {
		return false, err
	}
	defer unix.Close(tsfd)
	n := 0
	err = walkFiles(tsfd, "", func(rel string, isFile bool) error {
		if !isFile {
			return errDiffers
		}
		if _, ok := payload[rel]; !ok {
			return errDiffers
		}
		n++
		return nil
	})
	if err != nil {
		if errors.Is(err, errDiffers) {
			return false, nil
		}
		return false, err
	}
	if n != len(payload) {
		return false, nil
	}
	for p, fp := range payload {
		same, err := sameFile(tsfd, p, fp)
		if err != nil || !same {
			return false, err
		}
	}
	return true, nil
}

var errDiffers = errString("differs")

func sameFile(dirfd int, rel string, fp FileProjection) (bool, error) {
	fd, err := openBeneath(dirfd, rel, unix.O_RDONLY)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || fs.FileMode(st.Mode&0o777) != fp.Mode ||
		st.Size != int64(len(fp.Data)) {
		return false, nil
	}
	if fp.FsUser != nil && int64(st.Uid) != *fp.FsUser {
		return false, nil
	}
	if fp.FsGroup != nil && int64(st.Gid) != *fp.FsGroup {
		return false, nil
	}
	got, err := io.ReadAll(io.LimitReader(f, int64(len(fp.Data))+1))
	if err != nil {
		return false, err
	}
	return bytes.Equal(got, fp.Data), nil
}

// walkFiles calls fn for every entry below dirfd (depth first), with rel
// paths joined by '/'. Directories are descended, never followed; fn gets
// isFile=false for anything that is neither a regular file nor a directory.
func walkFiles(dirfd int, prefix string, fn func(rel string, isFile bool) error) error {
	names, err := readDirNames(dirfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		rel := name
		if prefix != "" {
			rel = prefix + "/" + name
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			sub, err := openDirNoFollow(dirfd, name)
			if err != nil {
				return err
			}
			err = walkFiles(sub, rel, fn)
			unix.Close(sub)
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := fn(rel, true); err != nil {
				return err
			}
		default:
			if err := fn(rel, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeTsDir creates a fresh timestamped dir in root and writes payload.
func (w *AtomicWriter) writeTsDir(root int, paths []string, payload map[string]FileProjection) (string, error) {
	prefix := w.clock.Now().UTC().Format(tsDirLayout)
	var ts string
	for i := 0; ; i++ {
		ts = fmt.Sprintf("%s%d", prefix, rand.Uint32())
		err := unix.Mkdirat(root, ts, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EEXIST) || i > 100 {
			return "", fmt.Errorf("atomic writer %s: create payload dir: %w", w.dir, err)
		}
	}
	fail := func(err error) (string, error) {
		_ = removeAllAt(root, ts)
		return "", fmt.Errorf("atomic writer %s: %w", w.dir, err)
	}
	tsfd, err := openDirNoFollow(root, ts)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(tsfd)
	for _, p := range paths {
		if err := writeFileBeneath(tsfd, p, payload[p]); err != nil {
			return fail(fmt.Errorf("write %q: %w", p, err))
		}
	}
	// The kubelet's payload dirs are 0755.
	if err := unix.Fchmod(tsfd, 0o755); err != nil {
		return fail(err)
	}
	return ts, nil
}

// writeFileBeneath creates rel (and its parent dirs, 0755) below dirfd. All
// components are created by us in a fresh dir and opened with O_NOFOLLOW.
func writeFileBeneath(dirfd int, rel string, fp FileProjection) error {
	segs := strings.Split(rel, "/")
	parent := dirfd
	closeParent := func() {
		if parent != dirfd {
			unix.Close(parent)
		}
	}
	defer func() { closeParent() }()
	for _, seg := range segs[:len(segs)-1] {
		if err := unix.Mkdirat(parent, seg, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		next, err := openDirNoFollow(parent, seg)
		if err != nil {
			return err
		}
		if err := unix.Fchmod(next, 0o755); err != nil {
			unix.Close(next)
			return err
		}
		closeParent()
		parent = next
	}
	name := segs[len(segs)-1]
	fd, err := unix.Openat(parent, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if _, err := f.Write(fp.Data); err != nil {
		return err
	}
	if fp.FsUser != nil || fp.FsGroup != nil {
		uid, gid := -1, -1
		if fp.FsUser != nil {
			uid = int(*fp.FsUser)
		}
		if fp.FsGroup != nil {
			gid = int(*fp.FsGroup)
		}
		if err := unix.Fchown(fd, uid, gid); err != nil {
			return err
		}
	}
	// Fchmod after write and chown (chown clears setuid bits; umask applied
	// at create time).
	if err := unix.Fchmod(fd, uint32(fp.Mode)); err != nil {
		return err
	}
	return f.Close()
}

// swapDataLink points ..data at ts atomically: a ..data_tmp symlink renamed
// over ..data. Whatever was at ..data_tmp is removed first; a ..data that is
// not a symlink (a pre-seeded dir) is removed so the rename can replace it.
func swapDataLink(root int, ts string) error {
	if err := removeAllAt(root, newDataDirName); err != nil {
		return err
	}
	if err := unix.Symlinkat(ts, root, newDataDirName); err != nil {
		return fmt.Errorf("symlink %s: %w", newDataDirName, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(root, dataDirName, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		if err := removeAllAt(root, dataDirName); err != nil {
			return err
		}
	}
	if err := unix.Renameat(root, newDataDirName, root, dataDirName); err != nil {
		return fmt.Errorf("rename %s over %s: %w", newDataDirName, dataDirName, err)
	}
	return nil
}

// ensureLink makes name in root a symlink to target, replacing whatever
// else is there (removed without following). fixed reports a change.
func ensureLink(root int, name, target string) (fixed bool, err error) {
	cur, err := readlinkAt(root, name)
	if err == nil && cur == target {
		return false, nil
	}
	if err := removeAllAt(root, name); err != nil {
		return false, err
	}
	if err := unix.Symlinkat(target, root, name); err != nil {
		return false, err
	}
	return true, nil
}

// openDirNoFollow opens name relative to dirfd as a directory without
// following a symlink in its last component.
func openDirNoFollow(dirfd int, name string) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
}

// openBeneath opens rel below dirfd refusing any symlink, magic link or
// escape (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS).
func openBeneath(dirfd int, rel string, flags int) (int, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
			continue
		}
		return fd, err
	}
}

func readlinkAt(dirfd int, name string) (string, error) {
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		if len(buf) >= unix.PathMax {
			return "", unix.ENAMETOOLONG
		}
		buf = make([]byte, len(buf)*4)
	}
}

// readDirNames lists dirfd's entries (sorted) without moving dirfd's offset
// for later callers: it reads through a fresh descriptor.
func readDirNames(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// removeAllAt removes name in dirfd and, if it is a directory, everything
// below it, never following a symlink. A missing name is not an error.
func removeAllAt(dirfd int, name string) error {
	for attempt := 0; attempt < 5; attempt++ {
		err := unix.Unlinkat(dirfd, name, 0)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EISDIR) && !errors.Is(err, unix.EPERM) {
			return err
		}
		sub, err := openDirNoFollow(dirfd, name)
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			continue // swapped for a non-dir: unlink it on the next round
		}
		if err != nil {
			return err
		}
		names, err := readDirNames(sub)
		if err == nil {
			for _, n := range names {
				if err = removeAllAt(sub, n); err != nil {
					break
				}
			}
		}
		unix.Close(sub)
		if err != nil {
			return err
		}
		err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return fmt.Errorf("remove %q: %w", name, unix.ENOTEMPTY)
}
