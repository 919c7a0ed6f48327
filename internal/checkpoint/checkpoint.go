package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// MaxSize is the largest payload Write accepts and Read returns: the
// manifest size limit (podconfig.MaxManifestSize), since a persisted pod
// set is replayed as pods and must fit the bounds live input has.
const MaxSize = 10 << 20

// MaxNameLen is the longest accepted checkpoint name, leaving room for the
// temporary-file and ".corrupt.N" suffixes within common 255-byte limits.
const MaxNameLen = 200

// headerLen is the size of the header in front of the payload:
// 4 bytes magic, 8 bytes payload length (big endian), 4 bytes CRC-32C.
const headerLen = 16

// magic marks a nodekit checkpoint file, format version 1.
const magic = "NKC\x01"

// maxSetAside bounds the ".corrupt.N" suffixes SetAside tries.
const maxSetAside = 1000

// File is the part of *os.File that Write uses.
type File interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// FS is the set of file system calls the package makes. OS implements it
// with the os package; tests inject failures through it.
type FS interface {
	MkdirAll(dir string, perm fs.FileMode) error
	CreateTemp(dir, pattern string) (File, error)
	ReadFile(path string) ([]byte, error)
	Rename(oldpath, newpath string) error
	Remove(path string) error
	Lstat(path string) (fs.FileInfo, error)
	// SyncDir makes the directory entries of dir durable (fsync on the
	// directory).
	SyncDir(dir string) error
}

// OS is the FS backed by the real file system.
type OS struct{}

var _ FS = OS{}

// MkdirAll implements FS.
func (OS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

// CreateTemp implements FS: like os.CreateTemp (the last "*" in pattern is
// replaced by a random string; mode 0600; O_EXCL), but the file is a bare
// descriptor: no os.File, so no poller registration and no extra fcntl and
// fstat calls on a path that runs on every checkpoint write.
func (OS) CreateTemp(dir, pattern string) (File, error) {
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36)+suffix)
		fd, err := syscall.Open(name, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC, 0o600)
		if err == nil {
			return &rawFile{fd: fd, name: name}, nil
		}
		if err == syscall.EINTR || (err == syscall.EEXIST && try < 100) {
			continue
		}
		return nil, &fs.PathError{Op: "createtemp", Path: name, Err: err}
	}
}

// rawFile is a write-only file on a bare descriptor (see OS.CreateTemp).
type rawFile struct {
	fd     int
	name   string
	closed bool
}

func (f *rawFile) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(f.fd, b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, &fs.PathError{Op: "write", Path: f.name, Err: err}
		}
		if m <= 0 {
			return n, io.ErrShortWrite
		}
		n += m
	}
	return n, nil
}

func (f *rawFile) Sync() error {
	if err := fsyncFD(f.fd); err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return nil
}

func (f *rawFile) Close() error {
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if err := syscall.Close(f.fd); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

func (f *rawFile) Name() string { return f.name }

// Chmod sets the file's mode on its descriptor (umask does not apply).
func (f *rawFile) Chmod(mode fs.FileMode) error {
	for {
		err := syscall.Fchmod(f.fd, uint32(mode.Perm()))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "chmod", Path: f.name, Err: err}
		}
		return nil
	}
}

// chmodder is a File that can set its mode (rawFile and *os.File can):
// WritePlainFS needs it for a mode other than CreateTemp's 0600.
type chmodder interface {
	Chmod(mode fs.FileMode) error
}

func fsyncFD(fd int) error {
	for {
		if err := syscall.Fsync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// ReadFile implements FS. It opens path once, without following a symlink
// in its last element (O_NOFOLLOW; O_NONBLOCK so a FIFO cannot block the
// open), checks on the descriptor that it is a regular file of at most
// MaxSize plus the header, and reads at most that much from it: a name
// swapped between a check and the open cannot deliver another file.
func (o OS) ReadFile(path string) ([]byte, error) { return o.ReadFileMax(path, MaxSize+headerLen) }

// ReadFileMax is ReadFile with a size limit of limit bytes in place of
// MaxSize plus the header, for a plain file (see WritePlain) whose
// format is smaller: a file larger than limit is ErrTooLarge (naming the
// file, its size and the limit) from its size on the descriptor, before
// any byte is read, and at most limit+1 bytes are ever read, so a file
// that grows after the check is refused too.
func (OS) ReadFileMax(path string, limit int64) ([]byte, error) {
	fd, err := openNoFollow(path)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%w: %s is a symbolic link", ErrCorrupt, filepath.Base(path))
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, filepath.Base(path))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%w: %s has %d bytes, limit %d", ErrTooLarge, filepath.Base(path), st.Size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s grew beyond %d bytes while read", ErrTooLarge, filepath.Base(path), limit)
	}
	return b, nil
}

func openNoFollow(path string) (int, error) {
	for {
		fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// Rename implements FS.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OS) Remove(path string) error { return os.Remove(path) }

// Lstat implements FS.
func (OS) Lstat(path string) (fs.FileInfo, error) { return os.Lstat(path) }

// SyncDir implements FS: open, fsync and close dir on a bare descriptor.
func (OS) SyncDir(dir string) error {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	serr := fsyncFD(fd)
	cerr := syscall.Close(fd)
	if serr != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: serr}
	}
	if cerr != nil {
		return &fs.PathError{Op: "close", Path: dir, Err: cerr}
	}
	return nil
}

// ValidateName reports whether name can be used as a checkpoint name: a
// single path segment that is not empty, does not start with '.' (which
// also excludes "." and ".."; temporary files start with '.'), contains no
// '/', '\\' or NUL and is at most MaxNameLen bytes long.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidName, MaxNameLen)
	case name[0] == '.':
		return fmt.Errorf("%w: %q starts with '.'", ErrInvalidName, name)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%w: %q contains '/', '\\' or NUL", ErrInvalidName, name)
	}
	return nil
}

func checkArgs(dir, name string) error {
	if dir == "" || strings.ContainsRune(dir, 0) {
		return fmt.Errorf("%w: %q", ErrInvalidDir, dir)
	}
	return ValidateName(name)
}

// Encode returns data with the checkpoint header in front of it.
func Encode(data []byte) []byte {
	out := make([]byte, headerLen+len(data))
	copy(out, magic)
	binary.BigEndian.PutUint64(out[4:12], uint64(len(data)))
	binary.BigEndian.PutUint32(out[12:16], crc32.Checksum(data, crcTable()))
	copy(out[headerLen:], data)
	return out
}

// Decode checks the header and checksum of b and returns its payload (a
// sub-slice of b). Anything that does not match is ErrCorrupt.
func Decode(b []byte) ([]byte, error) {
	if len(b) < headerLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(b))
	}
	if string(b[:4]) != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	n := binary.BigEndian.Uint64(b[4:12])
	if n != uint64(len(b)-headerLen) {
		return nil, fmt.Errorf("%w: header says %d payload bytes, file has %d", ErrCorrupt, n, len(b)-headerLen)
	}
	payload := b[headerLen:]
	if want, got := binary.BigEndian.Uint32(b[12:16]), crc32.Checksum(payload, crcTable()); want != got {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return payload, nil
}

func crcTable() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// Write stores data as dir/name atomically on the real file system.
func Write(dir, name string, data []byte) error { return WriteFS(OS{}, dir, name, data) }

// WriteFS stores data as dir/name atomically through fsys: dir is created if
// missing, the encoded bytes go to a temporary file in dir which is synced,
// closed and renamed over dir/name, then dir is synced. On any error before
// the rename the old file is untouched and the temporary file is removed.
// An error from the final directory sync is returned although the new file
// is already in place (its durability is then unknown).
func WriteFS(fsys FS, dir, name string, data []byte) error {
	if err := checkArgs(dir, name); err != nil {
		return err
	}
	if len(data) > MaxSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), MaxSize)
	}
	return writeFile(fsys, dir, name, Encode(data), 0)
}

// WritePlain stores data as dir/name atomically on the real file system,
// without the checkpoint header and with mode perm; see WritePlainFS.
func WritePlain(dir, name string, data []byte, perm fs.FileMode) error {
	return WritePlainFS(OS{}, dir, name, data, perm)
}

// WritePlainFS is WriteFS for a file whose format is not nodekit's: data
// is stored as it is, with no header and so no checksum (a file another
// program reads too, such as the kubelet's graceful_node_shutdown_state),
// through the same steps (temporary file, sync, rename, directory sync).
// The reader must check what it reads. The file gets the permission bits
// of perm exactly (set on the temporary file before it is written, so
// the umask does not narrow them): the other program's mode, such as
// 0644 for a file any user may read. The File that fsys.CreateTemp
// returns must then have a Chmod(fs.FileMode) error method, as OS's has;
// a perm of 0 keeps CreateTemp's 0600.
func WritePlainFS(fsys FS, dir, name string, data []byte, perm fs.FileMode) error {
	if err := checkArgs(dir, name); err != nil {
		return err
	}
	if len(data) > MaxSize {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(data), MaxSize)
	}
	return writeFile(fsys, dir, name, data, perm)
}

// writeFile does WriteFS's steps with the bytes to store; a perm other
// than 0 is set on the temporary file first.
func writeFile(fsys FS, dir, name string, b []byte, perm fs.FileMode) error {
	if err := fsys.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: create directory: %w", err)
	}
	f, err := fsys.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("checkpoint: create temporary file for %s: %w", name, err)
	}
	tmp := f.Name()
	committed := false
	defer func() {
		if !committed {
			_ = fsys.Remove(tmp)
		}
	}()
	if perm != 0 {
		c, ok := f.(chmodder)
		if !ok {
			_ = f.Close()
			return fmt.Errorf("checkpoint: set mode %v on %s: the file system's files have no Chmod", perm.Perm(), name)
		}
		if err := c.Chmod(perm); err != nil {
			_ = f.Close()
			return fmt.Errorf("checkpoint: set mode %v on %s: %w", perm.Perm(), name, err)
		}
	}
	if err := writeAll(f, b); err != nil {
		_ = f.Close()
		return fmt.Errorf("checkpoint: write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("checkpoint: sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", name, err)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("checkpoint: rename %s: %w", name, err)
	}
	committed = true
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("checkpoint: sync directory after writing %s: %w", name, err)
	}
	return nil
}

func writeAll(w io.Writer, b []byte) error {
	for len(b) > 0 {
		n, err := w.Write(b)
		if err != nil {
			return err
		}
		if n <= 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

// Read returns the payload of dir/name from the real file system.
func Read(dir, name string) ([]byte, error) { return ReadFS(OS{}, dir, name) }

// ReadFS returns the payload of dir/name read through fsys. A missing file
// yields an error that matches fs.ErrNotExist; a damaged one ErrCorrupt.
func ReadFS(fsys FS, dir, name string) ([]byte, error) {
	if err := checkArgs(dir, name); err != nil {
		return nil, err
	}
	p := filepath.Join(dir, name)
	fi, err := fsys.Lstat(p)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCorrupt, name)
	}
	if fi.Size() > MaxSize+headerLen {
		return nil, fmt.Errorf("%w: %s has %d bytes, limit %d", ErrTooLarge, name, fi.Size(), MaxSize+headerLen)
	}
	// The Lstat above is an early answer only: the name can be swapped
	// before the read. OS.ReadFile checks the descriptor it reads from
	// (no symlink, regular, within the size), and the length is checked
	// again for any FS.
	b, err := fsys.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	if len(b) > MaxSize+headerLen {
		return nil, fmt.Errorf("%w: %s has %d bytes, limit %d", ErrTooLarge, name, len(b), MaxSize+headerLen)
	}
	payload, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return payload, nil
}

// SetAside renames dir/name on the real file system; see SetAsideFS.
func SetAside(dir, name string) (string, error) { return SetAsideFS(OS{}, dir, name) }

// SetAsideFS renames dir/name to dir/name.corrupt, or to the first free
// dir/name.corrupt.N (N = 1, 2, ...) when that exists, syncs dir and
// returns the new path. Earlier set-aside files are never overwritten.
func SetAsideFS(fsys FS, dir, name string) (string, error) {
	if err := checkArgs(dir, name); err != nil {
		return "", err
	}
	src := filepath.Join(dir, name)
	for i := 0; i < maxSetAside; i++ {
		dst := src + ".corrupt"
		if i > 0 {
			dst += "." + strconv.Itoa(i)
		}
		_, err := fsys.Lstat(dst)
		if err == nil {
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("checkpoint: set aside %s: %w", name, err)
		}
		if err := fsys.Rename(src, dst); err != nil {
			return "", fmt.Errorf("checkpoint: set aside %s: %w", name, err)
		}
		if err := fsys.SyncDir(dir); err != nil {
			return dst, fmt.Errorf("checkpoint: sync directory after setting aside %s: %w", name, err)
		}
		return dst, nil
	}
	return "", fmt.Errorf("checkpoint: set aside %s: %d corrupt copies already exist", name, maxSetAside)
}
