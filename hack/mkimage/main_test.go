package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readTar returns the regular files of a tar by name, and the headers of all entries.
func readTar(t *testing.T, data []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	hdrs := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs[hdr.Name] = hdr
		if hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[hdr.Name] = b
		}
	}
	return files, hdrs
}

func blob(t *testing.T, files map[string][]byte, d string) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+strings.TrimPrefix(d, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing", d)
	}
	if got := digest(b); got != d {
		t.Fatalf("blob %s has digest %s", d, got)
	}
	return b
}

// build runs mkimage and returns the image's config and its layer's entries.
func build(t *testing.T, kind, bin, name string) (imageConfig, map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "img.tar")
	if err := run(kind, bin, name, out); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	files, _ := readTar(t, data)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	var idx index
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(idx.Manifests))
	}
	md := idx.Manifests[0]
	if md.Annotations[annotationRefName] != name || md.Annotations[annotationContainerdRef] != name {
		t.Errorf("index annotations = %v, want both names %q", md.Annotations, name)
	}
	var man manifest
	if err := json.Unmarshal(blob(t, files, md.Digest), &man); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(t, files, man.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(man.Layers) != 1 || man.Layers[0].MediaType != mediaTypeLayer {
		t.Fatalf("layers = %+v", man.Layers)
	}
	layer := blob(t, files, man.Layers[0].Digest)
	if !reflect.DeepEqual(cfg.RootFS.DiffIDs, []string{man.Layers[0].Digest}) {
		t.Errorf("diff_ids %v, layer %s", cfg.RootFS.DiffIDs, man.Layers[0].Digest)
	}
	lfiles, lhdrs := readTar(t, layer)
	return cfg, lfiles, lhdrs
}

func TestPauseImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(bin, []byte("\x7fELF fake"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, files, hdrs := build(t, "pause", bin, "localhost/nodekit/pause:1")
	if !reflect.DeepEqual(cfg.Config.Entrypoint, []string{"/pause"}) || cfg.Config.Cmd != nil {
		t.Errorf("entrypoint %v cmd %v", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if string(files["pause"]) != "\x7fELF fake" || hdrs["pause"].Mode != 0o755 {
		t.Errorf("pause entry: %q mode %o", files["pause"], hdrs["pause"].Mode)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
}

func TestBusyboxImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "busybox")
	script := "#!/bin/sh\nprintf 'busybox\\nsh\\nsleep\\n'\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, files, hdrs := build(t, "busybox", bin, "localhost/nodekit/busybox:1")
	if cfg.Config.Entrypoint != nil || !reflect.DeepEqual(cfg.Config.Cmd, []string{"sh"}) {
		t.Errorf("entrypoint %v cmd %v", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if string(files["bin/busybox"]) != script {
		t.Error("bin/busybox is not the given binary")
	}
	for _, applet := range []string{"bin/sh", "bin/sleep"} {
		h := hdrs[applet]
		if h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "busybox" {
			t.Errorf("%s: %+v", applet, h)
		}
	}
	if h := hdrs["bin/busybox"]; h.Typeflag != tar.TypeReg {
		t.Error("bin/busybox must stay the regular file, not a symlink to itself")
	}
	if h := hdrs["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/: %+v", h)
	}
	if !strings.Contains(string(files["etc/passwd"]), "root:x:0:0:") || !strings.Contains(string(files["etc/passwd"]), "nobody:x:65534:") {
		t.Errorf("etc/passwd = %q", files["etc/passwd"])
	}
}

func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "pause")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, out := range []string{a, b} {
		if err := run("pause", bin, "localhost/x:1", out); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Error("two runs on the same input differ")
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "o.tar")
	for _, tc := range []struct{ kind, bin, name, out string }{
		{"pause", "", "n:1", out},
		{"pause", bin, "", out},
		{"pause", bin, "n:1", ""},
		{"alpine", bin, "n:1", out},
		{"pause", filepath.Join(dir, "missing"), "n:1", out},
		{"busybox", bin, "n:1", out}, // not executable as busybox: --list fails
	} {
		if err := run(tc.kind, tc.bin, tc.name, tc.out); err == nil {
			t.Errorf("run(%q, %q, %q, %q): want an error", tc.kind, tc.bin, tc.name, tc.out)
		}
	}
}
