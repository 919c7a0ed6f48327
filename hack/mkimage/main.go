// Command mkimage writes the small test images nodekit's e2e tests use as
// OCI image-layout tarballs that `ctr -n k8s.io images import` accepts. No
// registry is reachable from the build machines, so the images are made here
// from local files:
//
//	mkimage -kind pause   -bin ./pause         -name localhost/nodekit/pause:1   -out pause.tar
//	mkimage -kind busybox -bin /bin/busybox    -name localhost/nodekit/busybox:1 -out busybox.tar
//
// The pause image holds the static binary as /pause and uses it as its
// entrypoint. The busybox image holds the static busybox as /bin/busybox with a
// symlink in /bin for every applet it lists, /tmp, and /etc/passwd and
// /etc/group with root and nobody; its command is ["sh"].
//
// The index carries both org.opencontainers.image.ref.name and
// io.containerd.image.name set to the full reference, so ctr imports the
// image under exactly that name. Output is deterministic for the same inputs.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"

	annotationRefName       = "org.opencontainers.image.ref.name"
	annotationContainerdRef = "io.containerd.image.name"

	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// epochUnix (2000-01-01) is the fixed modification time of every entry, so
// the same input gives the same digests.
const epochUnix = 946684800

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageConfig struct {
	Created      string        `json:"created"`
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       runtimeConfig `json:"config"`
	RootFS       rootFS        `json:"rootfs"`
	History      []history     `json:"history"`
}

type runtimeConfig struct {
	Env        []string `json:"Env"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

type manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

// entry is one file system object of the layer.
type entry struct {
	name     string // relative, no leading slash
	typeflag byte
	mode     int64
	linkname string
	data     []byte
}

func main() {
	kind := flag.String("kind", "", "image kind: pause or busybox")
	bin := flag.String("bin", "", "the static binary to pack (the pause binary, or busybox)")
	name := flag.String("name", "", "full image reference, e.g. localhost/nodekit/pause:1")
	out := flag.String("out", "", "output tar file")
	flag.Parse()
	if err := run(*kind, *bin, *name, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(kind, bin, name, out string) error {
	if bin == "" || name == "" || out == "" {
		return errors.New("-bin, -name and -out are required")
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var (
		entries []entry
		cfg     runtimeConfig
	)
	switch kind {
	case "pause":
		entries = []entry{{name: "pause", typeflag: tar.TypeReg, mode: 0o755, data: binData}}
		cfg = runtimeConfig{Env: []string{defaultPath}, Entrypoint: []string{"/pause"}, WorkingDir: "/"}
	case "busybox":
		applets, err := busyboxApplets(bin)
		if err != nil {
			return err
		}
		entries = busyboxEntries(binData, applets)
		cfg = runtimeConfig{Env: []string{defaultPath}, Cmd: []string{"sh"}, WorkingDir: "/"}
	default:
		return fmt.Errorf("-kind must be pause or busybox, got %q", kind)
	}

	layer, err := layerTar(entries)
	if err != nil {
		return err
	}
	layerDigest := digest(layer)
	created := time.Unix(epochUnix, 0).UTC().Format(time.RFC3339)
	config, err := json.Marshal(imageConfig{
		Created:      created,
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config:       cfg,
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{layerDigest}},
		History:      []history{{Created: created, CreatedBy: "nodekit hack/mkimage -kind " + kind}},
	})
	if err != nil {
		return err
	}
	man, err := json.Marshal(manifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: digest(config), Size: int64(len(config))},
		Layers:        []descriptor{{MediaType: mediaTypeLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	idx, err := json.Marshal(index{
		SchemaVersion: 2,
		MediaType:     mediaTypeIndex,
		Manifests: []descriptor{{
			MediaType:   mediaTypeManifest,
			Digest:      digest(man),
			Size:        int64(len(man)),
			Annotations: map[string]string{annotationRefName: name, annotationContainerdRef: name},
			Platform:    &platform{Architecture: runtime.GOARCH, OS: "linux"},
		}},
	})
	if err != nil {
		return err
	}

	files := []entry{
		{name: "blobs", typeflag: tar.TypeDir, mode: 0o755},
		{name: "blobs/sha256", typeflag: tar.TypeDir, mode: 0o755},
		{name: "oci-layout", typeflag: tar.TypeReg, mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", typeflag: tar.TypeReg, mode: 0o644, data: idx},
	}
	for _, blob := range [][]byte{layer, config, man} {
		files = append(files, entry{name: "blobs/sha256/" + strings.TrimPrefix(digest(blob), "sha256:"), typeflag: tar.TypeReg, mode: 0o644, data: blob})
	}
	archive, err := layerTar(files)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, archive, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// busyboxApplets asks the binary for its applet names.
func busyboxApplets(bin string) ([]string, error) {
	outb, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bin, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(outb)) {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		applets = append(applets, a)
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("%s --list printed no applets", bin)
	}
	sort.Strings(applets)
	return applets, nil
}

func busyboxEntries(bin []byte, applets []string) []entry {
	const passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
	const group = "root:x:0:\nnogroup:x:65534:\n"
	es := []entry{
		{name: "bin", typeflag: tar.TypeDir, mode: 0o755},
		{name: "bin/busybox", typeflag: tar.TypeReg, mode: 0o755, data: bin},
		{name: "etc", typeflag: tar.TypeDir, mode: 0o755},
		{name: "etc/passwd", typeflag: tar.TypeReg, mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", typeflag: tar.TypeReg, mode: 0o644, data: []byte(group)},
		{name: "root", typeflag: tar.TypeDir, mode: 0o700},
		{name: "tmp", typeflag: tar.TypeDir, mode: 0o1777},
		{name: "usr", typeflag: tar.TypeDir, mode: 0o755},
		{name: "usr/bin", typeflag: tar.TypeSymlink, mode: 0o777, linkname: "../bin"},
		{name: "var", typeflag: tar.TypeDir, mode: 0o755},
	}
	for _, a := range applets {
		es = append(es, entry{name: "bin/" + a, typeflag: tar.TypeSymlink, mode: 0o777, linkname: "busybox"})
	}
	return es
}

// layerTar writes entries as an uncompressed tar owned by root.
func layerTar(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name:     e.name,
			Typeflag: e.typeflag,
			Mode:     e.mode,
			Linkname: e.linkname,
			ModTime:  time.Unix(epochUnix, 0),
			Format:   tar.FormatPAX,
		}
		if e.typeflag == tar.TypeDir {
			hdr.Name += "/"
		}
		if e.typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if e.typeflag == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
