package apiserver

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// A secrets/ directory pre-seeded as a symlink is not written through and
// its target is not chmodded (issue 23, item 4): the copy is not kept, the
// secret is still served from the API server.
func TestPersistedSymlinkedKindDirRefused(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "objects")
	target := filepath.Join(root, "elsewhere")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(dir, SecretsDir)); err != nil {
		t.Fatal(err)
	}
	p := newPersisted(t, newOfflineClient(testObjects()...), dir, clocktesting.NewFakeClock(time.Unix(0, 0)), nil, nil)
	if s, err := p.Secret(t.Context(), "ns", "sec"); err != nil || string(s.Data["p"]) != "pw" {
		t.Fatalf("Secret = %v, %v; want it served from the API server", s, err)
	}
	entries, err := os.ReadDir(target)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("wrote %d files through the symlinked secrets dir", len(entries))
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("symlink target mode changed: %v, %v", fi.Mode(), err)
	}
}
