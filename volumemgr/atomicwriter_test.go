package volumemgr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

// treeSnapshot records every entry under dir (mode, content or link target,
// ctime) without following symlinks.
func treeSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v ctime=%d.%d", fi.Mode(), st.Ctim.Sec, st.Ctim.Nsec)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			desc += " -> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		}
		out[strings.TrimPrefix(p, dir)] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, a, b map[string]string) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s changed: %d entries before, %d after\nbefore %v\nafter %v", what, len(a), len(b), a, b)
	}
	for k, v := range a {
		if b[k] != v {
			t.Fatalf("%s changed at %q: %q -> %q", what, k, v, b[k])
		}
	}
}

func newTestWriter(t *testing.T) (*AtomicWriter, string, *testclock.FakeClock) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	return NewAtomicWriter(dir, clk, nil), dir, clk
}

func readVisible(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tsDirs(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if isTsDirName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestAtomicWriterLayoutAndUpdate(t *testing.T) {
	w, dir, clk := newTestWriter(t)
	st, err := w.Write(map[string]FileProjection{
		"a":       {Data: []byte("A"), Mode: 0o644},
		"x/y/z":   {Data: []byte("Z"), Mode: 0o400},
		"gone":    {Data: []byte("G"), Mode: 0o600},
		"x/other": {Data: []byte("O"), Mode: 0o644},
	})
	if err != nil || !st.Changed || st.LinksFixed != 3 {
		t.Fatalf("first write: %+v %v", st, err)
	}
	ts := tsDirs(t, dir)
	if len(ts) != 1 || !strings.HasPrefix(ts[0], "..2024_05_06_07_08_09.") {
		t.Fatalf("timestamped dirs %v", ts)
	}
	if got, _ := os.Readlink(filepath.Join(dir, dataDirName)); got != ts[0] {
		t.Fatalf("..data -> %q, want %q", got, ts[0])
	}
	for top, want := range map[string]string{"a": "..data/a", "x": "..data/x", "gone": "..data/gone"} {
		if got, _ := os.Readlink(filepath.Join(dir, top)); got != want {
			t.Fatalf("%s -> %q, want %q", top, got, want)
		}
	}
	if readVisible(t, dir, "x/y/z") != "Z" || readVisible(t, dir, "a") != "A" {
		t.Fatal("content")
	}
	fi, _ := os.Stat(filepath.Join(dir, "x/y/z"))
	if fi.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dir, ts[0])); fi.Mode().Perm() != 0o755 {
		t.Fatalf("payload dir mode %v", fi.Mode())
	}

	// Unchanged payload: no writes at all.
	before := treeSnapshot(t, dir)
	st, err = w.Write(map[string]FileProjection{
		"a":       {Data: []byte("A"), Mode: 0o644},
		"x/y/z":   {Data: []byte("Z"), Mode: 0o400},
		"gone":    {Data: []byte("G"), Mode: 0o600},
		"x/other": {Data: []byte("O"), Mode: 0o644},
	})
	if err != nil || st != (WriteStats{}) {
		t.Fatalf("unchanged write: %+v %v", st, err)
	}
	sameSnapshot(t, "volume dir after an unchanged write", before, treeSnapshot(t, dir))

	// A mode change alone is a change.
	clk.Step(time.Second)
	st, err = w.Write(map[string]FileProjection{
		"a":       {Data: []byte("A"), Mode: 0o600},
		"x/y/z":   {Data: []byte("Z"), Mode: 0o400},
		"gone":    {Data: []byte("G"), Mode: 0o600},
		"x/other": {Data: []byte("O"), Mode: 0o644},
	})
	if err != nil || !st.Changed {
		t.Fatalf("mode change: %+v %v", st, err)
	}

	// Update: new content, a removed file, old timestamped dir gone.
	clk.Step(time.Second)
	old := tsDirs(t, dir)
	st, err = w.Write(map[string]FileProjection{
		"a":     {Data: []byte("A2"), Mode: 0o644},
		"x/y/z": {Data: []byte("Z"), Mode: 0o400},
	})
	if err != nil || !st.Changed || st.Removed != 1 {
		t.Fatalf("update: %+v %v", st, err)
	}
	now := tsDirs(t, dir)
	if len(now) != 1 || now[0] == old[0] || !strings.HasPrefix(now[0], "..2024_05_06_07_08_11.") {
		t.Fatalf("timestamped dirs %v (old %v)", now, old)
	}
	if readVisible(t, dir, "a") != "A2" {
		t.Fatal("update not visible")
	}
	if _, err := os.Lstat(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removed path still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x/other")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("removed nested path still there: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, newDataDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("..data_tmp left behind")
	}

	// A deleted user-visible link is repaired without rewriting the payload.
	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	st, err = w.Write(map[string]FileProjection{
		"a":     {Data: []byte("A2"), Mode: 0o644},
		"x/y/z": {Data: []byte("Z"), Mode: 0o400},
	})
	if err != nil || st.Changed || st.LinksFixed != 1 || readVisible(t, dir, "a") != "A2" {
		t.Fatalf("repair: %+v %v", st, err)
	}

	// Empty payload: everything user-visible goes away.
	if _, err := w.Write(nil); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "..") {
			t.Fatalf("left %q after empty payload", e.Name())
		}
	}
}

func TestAtomicWriterRejectsBadPayload(t *testing.T) {
	w, dir, _ := newTestWriter(t)
	bad := []map[string]FileProjection{
		{"../escape": {Data: []byte("x")}},
		{"/abs": {Data: []byte("x")}},
		{"..data": {Data: []byte("x")}},
		{"a": {Mode: 0o4755}},
		{"a": {}, "a/b": {}},
	}
	for _, p := range bad {
		if _, err := w.Write(p); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("Write(%v) = %v, want ErrUnsafePath", p, err)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("rejected payloads touched the dir: %v", ents)
	}
}

// outsideDir makes a directory next to the volume holding files an attacker
// would like the writer to overwrite, chmod or delete.
func outsideDir(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "etc")
	if err := os.MkdirAll(filepath.Join(out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"passwd", "foo", "sub/b", "..data"} {
		if err := os.WriteFile(filepath.Join(out, f), []byte("precious "+f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestAtomicWriterSymlinkTraps(t *testing.T) {
	payload := map[string]FileProjection{
		"foo":    {Data: []byte("new foo"), Mode: 0o644},
		"passwd": {Data: []byte("new passwd"), Mode: 0o644},
		"sub/b":  {Data: []byte("new b"), Mode: 0o644},
	}
	traps := map[string]func(t *testing.T, dir, out string){
		"..data to outside dir": func(t *testing.T, dir, out string) {
			plugMust(t, os.Symlink(out, filepath.Join(dir, dataDirName)))
		},
		"..data to outside dir with visible links already in place": func(t *testing.T, dir, out string) {
			plugMust(t, os.Symlink(out, filepath.Join(dir, dataDirName)))
			plugMust(t, os.Symlink("..data/foo", filepath.Join(dir, "foo")))
			plugMust(t, os.Symlink("..data/sub", filepath.Join(dir, "sub")))
		},
		"..data relative escape": func(t *testing.T, dir, out string) {
			rel, _ := filepath.Rel(dir, out)
			plugMust(t, os.Symlink(rel, filepath.Join(dir, dataDirName)))
		},
		"visible paths pre-created as symlinks to outside": func(t *testing.T, dir, out string) {
			plugMust(t, os.Symlink(filepath.Join(out, "foo"), filepath.Join(dir, "foo")))
			plugMust(t, os.Symlink(filepath.Join(out, "passwd"), filepath.Join(dir, "passwd")))
			plugMust(t, os.Symlink(filepath.Join(out, "sub"), filepath.Join(dir, "sub")))
		},
		"timestamped dir is a symlink to outside": func(t *testing.T, dir, out string) {
			plugMust(t, os.Symlink(out, filepath.Join(dir, "..2020_01_01_00_00_00.1")))
			plugMust(t, os.Symlink("..2020_01_01_00_00_00.1", filepath.Join(dir, dataDirName)))
			plugMust(t, os.Symlink("..data/foo", filepath.Join(dir, "foo")))
		},
		"..data_tmp is a symlink to outside, ..data a real dir": func(t *testing.T, dir, out string) {
			plugMust(t, os.Symlink(out, filepath.Join(dir, newDataDirName)))
			plugMust(t, os.MkdirAll(filepath.Join(dir, dataDirName, "x"), 0o755))
			plugMust(t, os.Symlink(out, filepath.Join(dir, dataDirName, "x", "escape")))
		},
		"visible top-level dir holding symlinks to outside": func(t *testing.T, dir, out string) {
			plugMust(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
			plugMust(t, os.Symlink(filepath.Join(out, "sub", "b"), filepath.Join(dir, "sub", "b")))
			plugMust(t, os.Symlink(out, filepath.Join(dir, "sub", "all")))
		},
		"stale timestamped dir holding a symlink to outside": func(t *testing.T, dir, out string) {
			plugMust(t, os.MkdirAll(filepath.Join(dir, "..2019_01_01_00_00_00.9"), 0o755))
			plugMust(t, os.Symlink(out, filepath.Join(dir, "..2019_01_01_00_00_00.9", "foo")))
			plugMust(t, os.Symlink("..2019_01_01_00_00_00.9", filepath.Join(dir, dataDirName)))
		},
	}
	for name, seed := range traps {
		t.Run(name, func(t *testing.T) {
			w, dir, _ := newTestWriter(t)
			out := outsideDir(t)
			seed(t, dir, out)
			before := treeSnapshot(t, out)
			for i := 0; i < 2; i++ {
				if _, err := w.Write(payload); err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
			}
			sameSnapshot(t, "outside dir", before, treeSnapshot(t, out))
			for p, fp := range payload {
				if got := readVisible(t, dir, p); got != string(fp.Data) {
					t.Fatalf("%s = %q", p, got)
				}
			}
			if cur := currentTsDirPath(t, dir); !strings.HasPrefix(cur, "..2024_") {
				t.Fatalf("..data -> %q", cur)
			}
		})
	}
}

func currentTsDirPath(t *testing.T, dir string) string {
	t.Helper()
	s, err := os.Readlink(filepath.Join(dir, dataDirName))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func plugMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAtomicWriterVolumeDirIsSymlink(t *testing.T) {
	base := t.TempDir()
	out := outsideDir(t)
	dir := filepath.Join(base, "vol")
	plugMust(t, os.Symlink(out, dir))
	before := treeSnapshot(t, out)
	_, err := NewAtomicWriter(dir, nil, nil).Write(map[string]FileProjection{"foo": {Data: []byte("x"), Mode: 0o644}})
	if err == nil {
		t.Fatal("writing through a symlinked volume dir succeeded")
	}
	sameSnapshot(t, "outside dir", before, treeSnapshot(t, out))
}

func BenchmarkAtomicWriterUnchanged(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "vol")
	if err := os.Mkdir(dir, 0o777); err != nil {
		b.Fatal(err)
	}
	payload := map[string]FileProjection{}
	for i := 0; i < 10; i++ {
		payload[fmt.Sprintf("key-%d", i)] = FileProjection{Data: []byte(strings.Repeat("v", 200)), Mode: 0o644}
	}
	w := NewAtomicWriter(dir, nil, nil)
	if _, err := w.Write(payload); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if st, err := w.Write(payload); err != nil || st.Changed {
			b.Fatal(st, err)
		}
	}
}
