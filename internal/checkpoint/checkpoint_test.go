package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// step names the FS call faultFS fails.
type step string

const (
	stepMkdir      step = "mkdir"
	stepCreate     step = "create"
	stepWrite      step = "write"
	stepShortWrite step = "short-write" // writes half, then fails
	stepZeroWrite  step = "zero-write"  // returns 0, nil
	stepSync       step = "sync"
	stepClose      step = "close"
	stepRename     step = "rename"
	stepSyncDir    step = "syncdir"
)

var errInjected = errors.New("injected fault")

// faultFS is the real file system with one step failing, as if the machine
// lost power or the disk failed right there.
type faultFS struct {
	OS
	fail step
	// noCleanup makes Remove fail too, as if the process died before it
	// could remove its temporary file.
	noCleanup bool
}

func (f faultFS) MkdirAll(dir string, perm fs.FileMode) error {
	if f.fail == stepMkdir {
		return errInjected
	}
	return f.OS.MkdirAll(dir, perm)
}

func (f faultFS) CreateTemp(dir, pattern string) (File, error) {
	if f.fail == stepCreate {
		return nil, errInjected
	}
	file, err := f.OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fail: f.fail}, nil
}

func (f faultFS) Rename(oldpath, newpath string) error {
	if f.fail == stepRename {
		return errInjected
	}
	return f.OS.Rename(oldpath, newpath)
}

func (f faultFS) Remove(path string) error {
	if f.noCleanup {
		return errInjected
	}
	return f.OS.Remove(path)
}

func (f faultFS) SyncDir(dir string) error {
	if f.fail == stepSyncDir {
		return errInjected
	}
	return f.OS.SyncDir(dir)
}

type faultFile struct {
	File
	fail step
}

func (f *faultFile) Write(b []byte) (int, error) {
	switch f.fail {
	case stepWrite:
		return 0, errInjected
	case stepShortWrite:
		n, _ := f.File.Write(b[:len(b)/2])
		return n, errInjected
	case stepZeroWrite:
		return 0, nil
	}
	return f.File.Write(b)
}

func (f *faultFile) Sync() error {
	if f.fail == stepSync {
		return errInjected
	}
	return f.File.Sync()
}

func (f *faultFile) Chmod(mode fs.FileMode) error { return f.File.(chmodder).Chmod(mode) }

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.fail == stepClose {
		return errInjected
	}
	return err
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub", "dir") // created by Write
	for _, data := range [][]byte{[]byte("hello"), {}, bytes.Repeat([]byte{0xff}, 1<<16)} {
		if err := Write(dir, "state", data); err != nil {
			t.Fatalf("Write: %v", err)
		}
		got, err := Read(dir, "state")
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("Read = %d bytes, want %d", len(got), len(data))
		}
	}
	if got := listDir(t, dir); len(got) != 1 || got[0] != "state" {
		t.Fatalf("directory holds %v, want only [state]", got)
	}
	fi, err := os.Stat(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("file mode %v is readable by others", perm)
	}
}

func TestReadMissing(t *testing.T) {
	_, err := Read(t.TempDir(), "nothing")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing file reported as corrupt")
	}
}

// TestWriteCrashAtEveryStep fails each step of Write in turn and checks the
// previous file is still there and readable, and that no temporary file is
// left behind (unless cleanup itself was made to fail).
func TestWriteCrashAtEveryStep(t *testing.T) {
	old := []byte("old state")
	next := []byte("new state, longer than the old one")
	for _, s := range []step{stepMkdir, stepCreate, stepWrite, stepShortWrite, stepZeroWrite, stepSync, stepClose, stepRename, stepSyncDir} {
		for _, noCleanup := range []bool{false, true} {
			t.Run(string(s)+map[bool]string{false: "", true: "/no-cleanup"}[noCleanup], func(t *testing.T) {
				dir := t.TempDir()
				if err := Write(dir, "state", old); err != nil {
					t.Fatal(err)
				}
				err := WriteFS(faultFS{fail: s, noCleanup: noCleanup}, dir, "state", next)
				if err == nil {
					t.Fatalf("WriteFS with %s failing returned nil", s)
				}
				if s != stepZeroWrite && !errors.Is(err, errInjected) {
					t.Fatalf("err = %v, want the injected fault wrapped", err)
				}
				want := old
				if s == stepSyncDir {
					want = next // renamed already; only durability is in doubt
				}
				got, err := Read(dir, "state")
				if err != nil {
					t.Fatalf("Read after failed write: %v", err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("Read = %q, want %q", got, want)
				}
				names := listDir(t, dir)
				if !noCleanup && (len(names) != 1 || names[0] != "state") {
					t.Fatalf("directory holds %v, want only [state]", names)
				}
				// A later successful write still works, leftovers or not.
				if err := Write(dir, "state", next); err != nil {
					t.Fatal(err)
				}
				if got, err := Read(dir, "state"); err != nil || !bytes.Equal(got, next) {
					t.Fatalf("Read after recovery = %q, %v", got, err)
				}
			})
		}
	}
}

func TestReadCorrupt(t *testing.T) {
	good := Encode([]byte("some payload"))
	flip := bytes.Clone(good)
	flip[len(flip)-1] ^= 1
	badCRC := bytes.Clone(good)
	badCRC[13] ^= 0x80
	badMagic := bytes.Clone(good)
	badMagic[0] = 'X'
	longer := append(bytes.Clone(good), 'x')
	cases := map[string][]byte{
		"empty":          {},
		"short header":   good[:7],
		"header only":    good[:headerLen],
		"truncated":      good[:len(good)-3],
		"flipped bit":    flip,
		"bad checksum":   badCRC,
		"bad magic":      badMagic,
		"trailing bytes": longer,
		"plain json":     []byte(`{"kind":"PodList"}`),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "state"), content, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Read(dir, "state")
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestReadNotRegular(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir, "state"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

func TestSetAside(t *testing.T) {
	dir := t.TempDir()
	for i, want := range []string{"state.corrupt", "state.corrupt.1", "state.corrupt.2"} {
		content := []byte{byte('a' + i)}
		if err := os.WriteFile(filepath.Join(dir, "state"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := SetAside(dir, "state")
		if err != nil {
			t.Fatal(err)
		}
		if got != filepath.Join(dir, want) {
			t.Fatalf("SetAside = %s, want %s", got, want)
		}
		b, err := os.ReadFile(got)
		if err != nil || !bytes.Equal(b, content) {
			t.Fatalf("set-aside content = %q, %v; want %q", b, err, content)
		}
	}
	if _, err := Read(dir, "state"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after SetAside Read err = %v, want not exist", err)
	}
	if _, err := SetAside(dir, "state"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SetAside of a missing file: err = %v, want not exist", err)
	}
}

func TestInvalidNames(t *testing.T) {
	dir := t.TempDir()
	long := string(bytes.Repeat([]byte("a"), MaxNameLen+1))
	for _, name := range []string{"", ".", "..", "../x", "a/b", "/abs", "a\\b", "nul\x00", ".hidden", long} {
		if err := Write(dir, name, []byte("x")); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Write(%q) err = %v, want ErrInvalidName", name, err)
		}
		if _, err := Read(dir, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Read(%q) err = %v, want ErrInvalidName", name, err)
		}
		if _, err := SetAside(dir, name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("SetAside(%q) err = %v, want ErrInvalidName", name, err)
		}
	}
	if names := listDir(t, dir); len(names) != 0 {
		t.Fatalf("invalid names created %v", names)
	}
	for _, name := range []string{"state", "cpu_manager_state", "pods-http.json", "a..b"} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v", name, err)
		}
	}
	if err := Write("", "state", nil); !errors.Is(err, ErrInvalidDir) {
		t.Errorf("empty dir: err = %v, want ErrInvalidDir", err)
	}
}

func TestWriteTooLarge(t *testing.T) {
	err := Write(t.TempDir(), "state", make([]byte, MaxSize+1))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Encode([]byte("seed")))
	f.Add(Encode(nil))
	f.Add([]byte("NKC\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		payload, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("non-corrupt error %v", err)
			}
			return
		}
		if !bytes.Equal(Encode(payload), b) {
			t.Fatalf("accepted bytes do not re-encode to themselves")
		}
	})
}

func FuzzRead(f *testing.F) {
	f.Add(Encode([]byte("seed")))
	f.Add([]byte("garbage"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, "state"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(dir, "state"); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// OS.CreateTemp makes a new 0600 file named by the pattern in dir on a bare
// descriptor; the file writes, syncs and closes once; a second close fails.
func TestOSCreateTempRawFile(t *testing.T) {
	dir := t.TempDir()
	seen := map[string]bool{}
	for i := 0; i < 3; i++ {
		f, err := OS{}.CreateTemp(dir, ".state.tmp-*.x")
		if err != nil {
			t.Fatal(err)
		}
		name := f.Name()
		base := filepath.Base(name)
		if filepath.Dir(name) != dir || !strings.HasPrefix(base, ".state.tmp-") || !strings.HasSuffix(base, ".x") || base == ".state.tmp-.x" || seen[base] {
			t.Fatalf("temp name %q", name)
		}
		seen[base] = true
		if n, err := f.Write([]byte("hello")); n != 5 || err != nil {
			t.Fatalf("write: %d %v", n, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); !errors.Is(err, fs.ErrClosed) {
			t.Fatalf("second close: %v", err)
		}
		st, err := os.Stat(name)
		if err != nil || st.Mode().Perm() != 0o600 || st.Size() != 5 {
			t.Fatalf("stat %v %v", st, err)
		}
	}
	if _, err := (OS{}).CreateTemp(filepath.Join(dir, "missing"), "x-*"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CreateTemp in a missing dir: %v", err)
	}
	if err := (OS{}).SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := (OS{}).SyncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir of a missing dir: %v", err)
	}
}

// WritePlain stores the bytes as they are (no header), replaces the old
// file atomically and leaves nothing else behind; a failing step leaves
// the old file.
func TestWritePlain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sub") // created by WritePlain
	for _, data := range [][]byte{[]byte(`{"a":1}`), []byte(`{"a":22}` + "\n")} {
		if err := WritePlain(dir, "plain", data, 0); err != nil {
			t.Fatalf("WritePlain: %v", err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "plain"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("file holds %q, want %q", got, data)
		}
	}
	if got := listDir(t, dir); len(got) != 1 || got[0] != "plain" {
		t.Fatalf("directory holds %v, want only [plain]", got)
	}
	if err := WritePlainFS(faultFS{fail: stepRename}, dir, "plain", []byte("new"), 0o644); !errors.Is(err, errInjected) {
		t.Fatalf("WritePlainFS with the rename failing: %v, want the injected fault", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "plain")); string(got) != `{"a":22}`+"\n" {
		t.Errorf("after a failed write the file holds %q, want the old bytes", got)
	}
	if err := WritePlain(dir, "../x", nil, 0); !errors.Is(err, ErrInvalidName) {
		t.Errorf("WritePlain ../x: %v, want ErrInvalidName", err)
	}
	if err := WritePlain(dir, "big", make([]byte, MaxSize+1), 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("WritePlain of MaxSize+1 bytes: %v, want ErrTooLarge", err)
	}
}

// WritePlain gives the file the mode asked for, exactly (0644 for a file
// another program's users read; 0640 is not 0600 narrowed by a umask), or
// CreateTemp's 0600 for 0; a file system whose files cannot take a mode
// is an error, and the old file stays.
func TestWritePlainMode(t *testing.T) {
	dir := t.TempDir()
	for _, perm := range []fs.FileMode{0o644, 0o640, 0, 0o644} {
		if err := WritePlain(dir, "plain", []byte("x"), perm); err != nil {
			t.Fatalf("WritePlain(%v): %v", perm, err)
		}
		fi, err := os.Lstat(filepath.Join(dir, "plain"))
		if err != nil {
			t.Fatal(err)
		}
		want := perm
		if want == 0 {
			want = 0o600
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("WritePlain(%v): mode %v, want %v", perm, got, want)
		}
	}
	err := WritePlainFS(noChmodFS{}, dir, "plain", []byte("y"), 0o644)
	if err == nil || !strings.Contains(err.Error(), "no Chmod") {
		t.Errorf("WritePlainFS with files that have no Chmod: %v, want an error saying so", err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "plain")); string(got) != "x" {
		t.Errorf("after a failed write the file holds %q, want the old bytes", got)
	}
	if got := listDir(t, dir); len(got) != 1 {
		t.Errorf("directory holds %v, want only [plain]", got)
	}
}

// noChmodFS hands out files with no Chmod method.
type noChmodFS struct{ OS }

func (f noChmodFS) CreateTemp(dir, pattern string) (File, error) {
	file, err := f.OS.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return struct{ File }{file}, nil
}
