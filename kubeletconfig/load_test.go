package kubeletconfig

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

func TestDecodeStrict(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		sentinel  error
		want      []string // substrings of the error
	}{
		{"yaml unknown field", header + "maxPods: 10\nmaxPod: 20\n", ErrDecode, []string{`unknown field "maxPod"`}},
		{"yaml nested unknown field", header + "authentication:\n  x509:\n    clientCA: /ca\n", ErrDecode, []string{`unknown field "authentication.x509.clientCA"`}},
		{"yaml duplicate key", header + "maxPods: 10\nport: 1\nmaxPods: 20\n", ErrDecode, []string{`line 5: key "maxPods" already set in map`}},
		{"yaml both", header + "foo: 1\nport: 1\nport: 2\n", ErrDecode, []string{`key "port" already set`, `unknown field "foo"`}},
		{"json unknown field", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","evictionHardd":{}}`, ErrDecode, []string{`unknown field "evictionHardd"`}},
		{"json duplicate key", `{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":1,"maxPods":2}`, ErrDecode, []string{`duplicate field "maxPods"`}},
		{"wrong type", header + "maxPods: ten\n", ErrDecode, []string{"maxPods"}},
		{"wrong duration", header + "syncFrequency: soon\n", ErrDecode, []string{"soon"}},
		{"wrong apiVersion", "apiVersion: kubelet.config.k8s.io/v1\nkind: KubeletConfiguration\n", ErrWrongKind, []string{`apiVersion "kubelet.config.k8s.io/v1"`}},
		{"wrong kind", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: CredentialProviderConfig\n", ErrWrongKind, []string{`kind "CredentialProviderConfig"`}},
		{"no kind", "maxPods: 10\n", ErrWrongKind, []string{`apiVersion "", kind ""`}},
		{"empty", "  \n", ErrDecode, []string{"empty"}},
		{"not an object", "- a\n- b\n", ErrDecode, []string{"not an object"}},
		{"bad yaml", header + "maxPods: [\n", ErrDecode, []string{"yaml"}},
		{"too deep", header + "staticPodURLHeader: " + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + "\n", ErrTooLarge, []string{"nested more than 100 levels"}},
		{"too large", header + "# " + strings.Repeat("x", MaxFileSize) + "\n", ErrTooLarge, []string{"more than 10485760 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("error %v, want %v", err, tc.sentinel)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestDecodeYAMLAndJSONAlike(t *testing.T) {
	y, err := Decode([]byte(header + "maxPods: 17\nsyncFrequency: 30s\nevictionHard: {memory.available: 1Gi}\n"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Decode([]byte(`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","maxPods":17,"syncFrequency":"30s","evictionHard":{"memory.available":"1Gi"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"maxPods", y.MaxPods == 17 && j.MaxPods == 17},
		{"syncFrequency", y.SyncFrequency.Duration == 30*time.Second && j.SyncFrequency == y.SyncFrequency},
		{"evictionHard", y.EvictionHard["memory.available"] == "1Gi" && j.EvictionHard["memory.available"] == "1Gi"},
	} {
		if !c.ok {
			t.Errorf("%s: yaml %+v json %+v", c.name, y, j)
		}
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kubelet.yaml")
	doc := header + "staticPodPath: manifests\ntlsCertFile: pki/k.crt\ntlsPrivateKeyFile: /abs/k.key\nnodeStatusUpdateFrequency: 20s\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := f.Config
	if c.StaticPodPath != filepath.Join(dir, "manifests") || c.TLSCertFile != filepath.Join(dir, "pki/k.crt") || c.TLSPrivateKeyFile != "/abs/k.key" {
		t.Errorf("paths not resolved against the file's directory: %q %q %q", c.StaticPodPath, c.TLSCertFile, c.TLSPrivateKeyFile)
	}
	// Defaulted, the report frequency following the given update frequency.
	if c.MaxPods != 110 || c.NodeStatusReportFrequency.Duration != 20*time.Second || c.SyncFrequency.Duration != time.Minute {
		t.Errorf("not defaulted: maxPods %d report %v sync %v", c.MaxPods, c.NodeStatusReportFrequency, c.SyncFrequency)
	}
	if !f.Given["staticPodPath"] || !f.Given["nodeStatusUpdateFrequency"] || f.Given["maxPods"] || f.Given["kind"] {
		t.Errorf("Given %v", f.Given)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(header+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), path) {
		t.Errorf("bad file: %v (want ErrDecode naming the file)", err)
	}
}
