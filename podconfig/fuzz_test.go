package podconfig

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
)

func FuzzDecodeStaticPods(f *testing.F) {
	f.Add([]byte(staticYAML))
	f.Add([]byte(`{"apiVersion":"v1","kind":"PodList","items":[{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}]}`))
	f.Add([]byte(aliasBomb()))
	f.Add(bytes.Repeat([]byte("a"), MaxManifestSize+1))
	f.Add([]byte(strings.Repeat("[", 5000)))
	f.Add([]byte(strings.Repeat("- ", 5000) + "x"))
	f.Add([]byte(`{"a":` + strings.Repeat(`{"a":`, 500) + "1" + strings.Repeat("}", 501)))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, resources: {limits: {cpu: 1e-99999999}}}]\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: \"a\\u0000b\"}\nspec:\n  containers: [{name: a, image: b}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		opts := StaticPodOptions{NodeName: "n", Source: kubetypes.SourceFile, Origin: "/f", AddNoExecuteToleration: true}
		start := time.Now()
		pods, err := DecodeStaticPods(data, opts)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("decoding %d bytes took %v", len(data), d)
		}
		if err != nil {
			return
		}
		again, err := DecodeStaticPods(data, opts)
		if err != nil || len(again) != len(pods) {
			t.Fatalf("second decode differs: %v", err)
		}
		for i := range pods {
			if pods[i].UID != again[i].UID {
				t.Fatalf("unstable UID %s vs %s", pods[i].UID, again[i].UID)
			}
			if !IsSafePathSegment(string(pods[i].UID)) || !IsSafePathSegment(pods[i].Name) {
				t.Fatalf("unsafe uid/name %q %q", pods[i].UID, pods[i].Name)
			}
			if err := ValidatePod(pods[i], true); err != nil {
				t.Fatalf("decoded pod does not validate: %v", err)
			}
		}
	})
}
