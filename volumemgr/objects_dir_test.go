package volumemgr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirObjectSource(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		plugMust(t, os.MkdirAll(filepath.Dir(p), 0o755))
		plugMust(t, os.WriteFile(p, []byte(content), 0o600))
	}
	write("configmaps/ns/cfg.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  a.conf: hello\nbinaryData:\n  b: AAEC\n")
	write("secrets/ns/sec.json", `{"data":{"pw":"aHVudGVyMg=="},"stringData":{"user":"bob"}}`)
	write("configmaps/ns/liar.yml", "metadata:\n  name: other\n")
	write("configmaps/ns/broken.yaml", "data: [")
	src := &DirObjectSource{Dir: dir}

	cm, err := src.ConfigMap(t.Context(), "ns", "cfg")
	if err != nil || cm.Data["a.conf"] != "hello" || string(cm.BinaryData["b"]) != "\x00\x01\x02" || cm.Name != "cfg" || cm.Namespace != "ns" {
		t.Fatalf("%+v %v", cm, err)
	}
	s, err := src.Secret(t.Context(), "ns", "sec")
	if err != nil || string(s.Data["pw"]) != "hunter2" || string(s.Data["user"]) != "bob" || s.StringData != nil {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := src.ConfigMap(t.Context(), "ns", "absent"); !errors.Is(err, ErrObjectNotFound) {
		t.Fatal(err)
	}
	if _, err := src.Secret(t.Context(), "other", "sec"); !errors.Is(err, ErrObjectNotFound) {
		t.Fatal(err)
	}
	if _, err := src.ConfigMap(t.Context(), "ns", "liar"); err == nil || !strings.Contains(err.Error(), "holds") {
		t.Fatal(err)
	}
	if _, err := src.ConfigMap(t.Context(), "ns", "broken"); err == nil || errors.Is(err, ErrObjectNotFound) {
		t.Fatal(err)
	}
	for _, bad := range [][2]string{{"..", "cfg"}, {"ns", "../../etc/passwd"}, {"ns/x", "cfg"}, {"", "cfg"}} {
		if _, err := src.ConfigMap(t.Context(), bad[0], bad[1]); !errors.Is(err, ErrUnsafePath) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	write("configmaps/ns/big.yaml", "data:\n  a: "+strings.Repeat("x", maxObjectFileSize)+"\n")
	if _, err := src.ConfigMap(t.Context(), "ns", "big"); err == nil || !strings.Contains(err.Error(), "larger") {
		t.Fatal(err)
	}
}
