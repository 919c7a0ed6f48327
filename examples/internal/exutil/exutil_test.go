package exutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "node.kubeconfig")
	if err := os.WriteFile(kc, []byte("clusters:\n- cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: ca.crt\nusers:\n- user:\n    token: secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RestConfig(kc, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" || cfg.TLSClientConfig.CAFile != filepath.Join(dir, "ca.crt") {
		t.Fatalf("config = %+v", cfg)
	}
	cfg, err = RestConfig("", "https://h:1", "t", "/ca")
	if err != nil || cfg.Host != "https://h:1" || cfg.BearerToken != "t" || cfg.TLSClientConfig.CAFile != "/ca" {
		t.Fatalf("flags: %+v %v", cfg, err)
	}
	two := filepath.Join(dir, "two.kubeconfig")
	if err := os.WriteFile(two, []byte("clusters:\n- cluster:\n    server: https://a\n- cluster:\n    server: https://b\nusers:\n- user:\n    token: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][4]string{{}, {"", "https://h:1", "", ""}, {kc, "", "t", ""}, {filepath.Join(dir, "none"), "", "", ""}, {two, "", "", ""}} {
		if _, err := RestConfig(c[0], c[1], c[2], c[3]); err == nil {
			t.Errorf("%q: no error", c)
		}
	}
}

func TestTableEmpty(t *testing.T) {
	var sb strings.Builder
	Table(&sb, nil)
	if !strings.Contains(sb.String(), "(no pods)") {
		t.Errorf("empty table %q", sb.String())
	}
}
