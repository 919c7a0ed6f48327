package checkpoint

import (
	"strings"
	"testing"
	"time"

	ckpt "github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podconfig"
)

// A persisted pod set whose CRC matches but whose pod carries a slow
// quantity is re-validated with the bounds of live input (issue 23, item
// 6): refused quickly and set aside, the previous generation replayed.
func TestReplayRevalidatesPods(t *testing.T) {
	good := `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"good","namespace":"ns","uid":"uid-good"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`
	for name, bad := range map[string]string{
		"slow quantity":       `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a","namespace":"ns","uid":"u"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"cpu":"1e-99999999"}}}]}}]}`,
		"slow hugepage name":  `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a","namespace":"ns","uid":"u"},"spec":{"containers":[{"name":"c","image":"i","resources":{"limits":{"hugepages-1e-99999999":"1Mi"}}}]}}]}`,
		"too deep":            `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a","namespace":"ns","uid":"u","annotations":` + strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200) + `}}]}`,
		"unsafe uid":          `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a","namespace":"ns","uid":"../../etc"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`,
		"too many containers": `{"kind":"PodList","apiVersion":"v1","items":[{"metadata":{"name":"a","namespace":"ns","uid":"u"},"spec":{"containers":[` + strings.Repeat(`{"name":"c"},`, podconfig.MaxContainersPerPod) + `{"name":"d"}]}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			h := newHarness(t, dir, -1, nil)
			if err := ckpt.Write(dir, h.src.FileName()+".prev", []byte(good)); err != nil {
				t.Fatal(err)
			}
			if err := ckpt.Write(dir, h.src.FileName(), []byte(bad)); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			sent, err := h.src.Replay(t.Context())
			if d := time.Since(start); d > time.Second {
				t.Errorf("replay took %v", d)
			}
			if err != nil || !sent {
				t.Fatalf("Replay = %v, %v; want the previous set replayed", sent, err)
			}
			u := h.recv(t)
			if u.Op != kubetypes.SET || len(u.Pods) != 1 || u.Pods[0].Name != "good" {
				t.Fatalf("replayed %v %d pods, want the previous set (pod good)", u.Op, len(u.Pods))
			}
		})
	}
}

// Checkpoints are capped at the manifest size limit, not 64 MiB.
func TestCheckpointCapIsManifestLimit(t *testing.T) {
	if ckpt.MaxSize > podconfig.MaxManifestSize {
		t.Fatalf("checkpoint.MaxSize = %d, above podconfig.MaxManifestSize %d", ckpt.MaxSize, podconfig.MaxManifestSize)
	}
}
