package podconfig

import (
	"bytes"
	"context"
	"errors"
	yaml3 "go.yaml.in/yaml/v3"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocsOf returns the bytes allocated while f runs (the test is not
// parallel, so nothing else of note allocates meanwhile).
func allocsOf(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// YAML without aliases is measured before any tree is built (issue 23,
// item 2): a list of millions of tiny values is refused in time and memory
// linear in the input, as the same content in JSON is.
func TestDecodeYAMLWithoutAliasesBoundedBeforeDecoding(t *testing.T) {
	for name, in := range map[string][]byte{
		"block list": bytes.Repeat([]byte("- a\n"), 6<<20/4),
		"flow list":  append(append([]byte("["), bytes.Repeat([]byte("a,"), 6<<20/2)...), ']'),
		"flow map":   append(append([]byte("{"), bytes.Repeat([]byte("a: 1, "), 6<<20/6)...), '}'),
		"nulls":      bytes.Repeat([]byte("-\n"), 6<<20/2),
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			alloc := allocsOf(func() {
				_, err = DecodeStaticPods(in, StaticPodOptions{NodeName: "n", Source: "file", Origin: "m.yaml"})
			})
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			if limit := uint64(2*len(in) + 1<<20); alloc > limit {
				t.Errorf("refusing %d bytes allocated %d bytes, want at most %d", len(in), alloc, limit)
			}
		})
	}
}

// BenchmarkRefuseFlatYAML is the time to refuse 6 MiB of a flow map, the
// slowest shape of the test above (the time is a benchmark's to report; the
// test asserts only the allocation bound, which does not move with load).
func BenchmarkRefuseFlatYAML(b *testing.B) {
	in := append(append([]byte("{"), bytes.Repeat([]byte("a: 1, "), 6<<20/6)...), '}')
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStaticPods(in, StaticPodOptions{NodeName: "n", Source: "file", Origin: "m.yaml"}); !errors.Is(err, ErrTooLarge) {
			b.Fatalf("err = %v, want ErrTooLarge", err)
		}
	}
}

// The count is an upper bound on the nodes of the document: every real
// manifest shape is counted at least at its true size.
func TestCountYAMLNodesIsUpperBound(t *testing.T) {
	for in, atLeast := range map[string]int{
		"a":                        1,
		"- a\n- b\n":               3,
		"-\n-\n":                   3,
		"{a, b}":                   5,
		"[a: b]":                   4,
		"[[a]]":                    3,
		"a: {b: [c, d], e: f}\n":   9,
		"? a\n: b\n":               3,
		"- - - a\n":                4,
		"a:\n- b\n- c: d\n":        7,
		"\"a\":b":                  3,
		staticYAML:                 20,
		strings.Repeat("- x\n", 9): 10,
	} {
		if got := countYAMLNodes([]byte(in)); got < atLeast {
			t.Errorf("countYAMLNodes(%q) = %d, want >= %d", in, got, atLeast)
		}
	}
}

// The push handler takes its one slot before it decodes (issue 23, item 2):
// with the slot held, a request whose client has gone is answered 503
// without its body ever being decoded (before the fix: 400 after decoding).
func TestPushDecodesOnlyInsideItsSlot(t *testing.T) {
	h, _ := newTestPush(t, PushConfig{})
	if err := h.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.release()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader("not: [a pod"))
	req.Header.Set("Content-Type", "application/yaml")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("POST while the slot is held = %d %s, want 503 (decoded outside the slot)", rec.Code, rec.Body)
	}
}

// FuzzDecodeYAMLBounded feeds YAML to DecodeStaticPods and bounds the cost
// of every input, accepted or refused: time, and bytes allocated. The
// conversion to JSON allocates at most yamlAllocLimit plus the slow path's
// slack (5 times the input plus 5 MiB), and the whole decode at most what
// decoding the resulting JSON costs plus that (10% more under the race
// detector, whose sync.Pool drops objects). countYAMLNodes must never count
// fewer nodes than the document has.
func FuzzDecodeYAMLBounded(f *testing.F) {
	f.Add([]byte(staticYAML))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte("{a: [b, {c: d}], e: f}"))
	f.Add([]byte("a: &x [1, 2]\nb: *x\n"))
	f.Add([]byte("? a\n: b\n-\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: c, image: i}]}}\n"))
	f.Add([]byte("a: |\n  x\n  y\nb: >-\n  z\n---\nc: d\n"))
	f.Add([]byte("a: !!str 1\nb: {<<: {c: d}}\nc: 1\nc: 2\n"))
	opts := StaticPodOptions{NodeName: "n", Source: "file", Origin: "f.yaml"}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		start := time.Now()
		var js []byte
		var convErr error
		conv := allocsOf(func() { js, convErr = manifestToJSON(data) })
		if limit := yamlAllocLimit(len(data)) + yamlSlack; conv > limit {
			t.Fatalf("converting %d bytes allocated %d, limit %d", len(data), conv, limit)
		}
		whole := allocsOf(func() { _, _ = DecodeStaticPods(data, opts) })
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%d bytes took %v", len(data), d)
		}
		if convErr == nil {
			asJSON := allocsOf(func() { _, _ = DecodeStaticPods(js, opts) })
			limit := asJSON + yamlAllocLimit(len(data)) + yamlSlack
			if raceEnabled {
				limit += asJSON / 10
			}
			if whole > limit {
				t.Fatalf("%d bytes of YAML allocated %d, the same as JSON %d: limit %d", len(data), whole, asJSON, limit)
			}
		}
		if bytes.IndexByte(data, '*') < 0 {
			var doc yaml3.Node
			if err := yaml3.Unmarshal(data, &doc); err == nil {
				if n, c := yamlNodeCount(&doc), countYAMLNodes(data); n > c {
					t.Fatalf("countYAMLNodes = %d, the document has %d nodes", c, n)
				}
			}
		}
	})
}

func yamlNodeCount(n *yaml3.Node) int {
	if n == nil {
		return 0
	}
	c := 1
	if n.Kind == yaml3.DocumentNode {
		c = 0
	}
	for _, k := range n.Content {
		c += yamlNodeCount(k)
	}
	return c
}
