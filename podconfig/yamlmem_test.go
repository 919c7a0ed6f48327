package podconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/nodekit/nodekit/kubetypes"
	"sigs.k8s.io/yaml"
)

// yamlAllocLimit is the memory bound of the YAML path (issue 23, item 2):
// converting n bytes of YAML allocates at most a few times n, as JSON
// does, plus a constant. Measured (1 and 10 MiB): 1.4x for block lists and
// deep maps, 3.5x for flow lists, 4.0x for one long block scalar.
func yamlAllocLimit(n int) uint64 { return uint64(5*n + 1<<20) }

// repeatYAML builds about size bytes of YAML by repeating unit between
// head and tail.
func repeatYAML(size int, head, unit, tail string) []byte {
	return []byte(head + strings.Repeat(unit, (size-len(head)-len(tail))/len(unit)) + tail)
}

// deepBlockMaps is size bytes of block maps nested 90 deep, each under a
// top-level key of its own.
func deepBlockMaps(size int) []byte {
	var b bytes.Buffer
	for j := 0; b.Len() < size; j++ {
		fmt.Fprintf(&b, "top%d:\n", j)
		for i := 1; i < 90; i++ {
			fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat(" ", i), i)
		}
		fmt.Fprintf(&b, "%sv: x\n", strings.Repeat(" ", 90))
	}
	return b.Bytes()
}

// podListYAML is a PodList of n small pods in block YAML.
func podListYAML(n int) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `- apiVersion: v1
  kind: Pod
  metadata:
    name: pod-%d
    labels: {app: web, tier: "front"}
  spec:
    containers:
    - name: app
      image: registry.local/app:1.2.3
      args: ["--port", "8080"]
      resources:
        limits: {cpu: 500m, memory: 128Mi}
`, i)
	}
	return b.Bytes()
}

// Every shape of YAML, accepted or refused, is converted in memory a few
// times its size (yamlAllocLimit), measured as bytes allocated around the
// decode. Before the fix go-yaml built a tree first: 88 times the input
// for a list of "- a" lines, 7 times for a block scalar, and several
// hundred bytes per value of any manifest.
func TestDecodeYAMLMemoryBoundedByInput(t *testing.T) {
	mib, big := 1<<20, 9<<20 // big: near MaxManifestSize
	if raceEnabled {
		// The race detector makes the scanner ten times slower; the
		// bound's constant then dominates, but go-yaml's tree still
		// exceeds it many times over.
		mib, big = 256<<10, 256<<10
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"block list", repeatYAML(mib, "", "- a\n", "")},
		{"block list of words", repeatYAML(big, "", "- abcdefghijklmnopqrstuvwxyz0123\n", "")},
		{"flow list", repeatYAML(mib, "[", "a, ", "a]")},
		{"flow map", []byte("a: {" + func() string {
			var b strings.Builder
			for i := 0; b.Len() < mib; i++ {
				fmt.Fprintf(&b, "k%d: 1, ", i)
			}
			return b.String()
		}() + "z: 1}")},
		{"deep block maps", deepBlockMaps(big)},
		{"block scalar", repeatYAML(big, "a: |\n", "  "+strings.Repeat("x", 78)+"\n", "")},
		{"folded scalar", repeatYAML(big, "a: >\n", "  "+strings.Repeat("x", 78)+"\n\n", "")},
		{"quoted scalars", repeatYAML(big, "", "- \"ab\\tc\\u00e9 'd' \\\"e\\\" fghijklmnopqrstuvwxyz\"\n", "")},
		{"many documents", repeatYAML(big, "", "---\nabcdefghijklmnopqrstuvwxyz: 0123456789abcdef\n", "")},
		{"pod list", podListYAML(2 * mib / 300)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := allocsOf(func() {
				_, _ = manifestToJSON(tc.in)
			})
			t.Logf("%d bytes: %d allocated (%.1fx)", len(tc.in), alloc, float64(alloc)/float64(len(tc.in)))
			if limit := yamlAllocLimit(len(tc.in)); alloc > limit {
				t.Errorf("converting %d bytes of YAML allocated %d bytes (%.1fx), want at most %d", len(tc.in), alloc, float64(alloc)/float64(len(tc.in)), limit)
			}
		})
	}
}

// A whole PodList decodes from YAML in the memory it takes from JSON, plus
// the YAML bound: YAML costs no more per pod than the JSON path's own
// decoding, defaulting and validation.
func TestDecodePodListYAMLCostsWhatJSONCosts(t *testing.T) {
	n := 2000
	if raceEnabled {
		n = 500
	}
	in := podListYAML(n)
	js, err := yaml.YAMLToJSON(in)
	if err != nil {
		t.Fatal(err)
	}
	var yamlPods, jsonPods int
	yamlAlloc := allocsOf(func() {
		pods, err := DecodeStaticPods(in, fileOpts("/l.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		yamlPods = len(pods)
	})
	jsonAlloc := allocsOf(func() {
		pods, err := DecodeStaticPods(js, fileOpts("/l.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		jsonPods = len(pods)
	})
	if yamlPods != n || jsonPods != n {
		t.Fatalf("decoded %d pods from YAML, %d from JSON, want %d", yamlPods, jsonPods, n)
	}
	limit := jsonAlloc + yamlAllocLimit(len(in))
	if raceEnabled {
		limit += jsonAlloc / 10 // sync.Pool drops objects under the race detector
	}
	if yamlAlloc > limit {
		t.Errorf("%d bytes of YAML allocated %d bytes, the same pods in JSON %d: want at most %d", len(in), yamlAlloc, jsonAlloc, limit)
	}
}

// What the streaming converter leaves to go-yaml (tags, merge keys,
// duplicate keys) is bounded too: go-yaml gets at most yamlSlowNodeLimit
// values, so its tree costs a few times the input; beyond that the
// manifest is refused with the limit named.
func TestDecodeYAMLSlowPathBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		unit string
	}{
		{"tags", "- !!str a" + strings.Repeat("x", 200) + "\n"},
		{"merge keys", "- {<<: {a: b}, c: " + strings.Repeat("x", 200) + "}\n"},
		{"duplicate keys", "- {a: b, a: " + strings.Repeat("x", 200) + "}\n"},
	} {
		for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
			t.Run(fmt.Sprintf("%s %d", tc.name, size), func(t *testing.T) {
				in := repeatYAML(size, "", tc.unit, "")
				var err error
				alloc := allocsOf(func() { _, err = manifestToJSON(in) })
				t.Logf("%d bytes: %d allocated (%.1fx): %v", len(in), alloc, float64(alloc)/float64(len(in)), err)
				if limit := yamlAllocLimit(len(in)) + yamlSlack; alloc > limit {
					t.Errorf("%d bytes allocated %d (%.1fx), want at most %d", len(in), alloc, float64(alloc)/float64(len(in)), limit)
				}
				if size == 8<<20 && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "needs a full YAML decoder")) {
					t.Errorf("err = %v, want ErrTooLarge naming the full decoder's limit", err)
				}
			})
		}
	}
}

// yamlCorpus is every manifest the repository has: the examples, the test
// manifests, the fuzz seeds, and manifests using each YAML feature a pod
// manifest may (multi-document, anchors and aliases, merge keys, block and
// quoted scalars, YAML 1.1 booleans, numbers in every base).
func yamlCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	corpus := map[string][]byte{
		"staticYAML":   []byte(staticYAML),
		"testListYAML": []byte(testListYAML),
		"testPodJSON":  []byte(testPodJSON),
		"multi-document": []byte(staticYAML + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: second}\n" +
			"spec: {containers: [{name: c, image: i}]}\n"),
		"anchors": []byte(`apiVersion: v1
kind: Pod
metadata:
  name: anchored
  labels: &labels {app: web, tier: front}
  annotations: *labels
spec:
  containers:
  - &c
    name: a
    image: busybox
    env: &env
    - {name: A, value: "1"}
    - name: B
      value: 'two'
    resources: &res {limits: {cpu: "0.5", memory: 64Mi}, requests: {cpu: 250m}}
  - name: b
    image: busybox
    env: *env
    resources: *res
`),
		"merge keys": []byte(`apiVersion: v1
kind: Pod
metadata: {name: merged}
spec:
  containers:
  - &base {name: a, image: busybox, imagePullPolicy: IfNotPresent}
  - <<: *base
    name: b
`),
		"scalars": []byte(`# every scalar style
apiVersion: "v1"
kind: 'Pod'
metadata:
  name: scalars
  labels:
    "yes": "no"
    plain: value with spaces
  annotations:
    literal: |
      line one
      line two
    folded: >-
      folded
      text

      new paragraph
    keep: |+
      kept

    quoted: "tab\there \u00e9 \x41 \"q\""
    single: 'it''s'
    empty: ""
    multi: plain
      continued
    date: 2026-11-27
spec:
  terminationGracePeriodSeconds: 0x1E
  activeDeadlineSeconds: 1_000
  hostNetwork: yes
  enableServiceLinks: off
  priority: 017
  containers:
  - name: c
    image: busybox
    command: [sh, -c, "echo hi; sleep 1"]
    tty: True
    resources:
      limits: {cpu: 1.5, memory: 1e9, ephemeral-storage: 1Gi}
      requests: {cpu: 0.25}
    ports: [{containerPort: 80, protocol: TCP}, {containerPort: +8080}]
  tolerations:
  - {key: k, operator: Exists, tolerationSeconds: -1}
`),
		"flow pod":     []byte(`{apiVersion: v1, kind: Pod, metadata: {name: flow, labels: {a: b}}, spec: {containers: [{name: c, image: i, args: [a, "b c", 'd']}]}}`),
		"json array":   []byte(`[{"apiVersion":"v1"}]`),
		"document end": []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: ended}\nspec: {containers: [{name: c, image: i}]}\n...\n---\nbroken: [\n"),
		"crlf":         []byte("apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: crlf\r\nspec:\r\n  containers:\r\n  - name: c\r\n    image: i\r\n"),
		"bom":          []byte("\ufeffapiVersion: v1\nkind: Pod\nmetadata: {name: bom}\nspec: {containers: [{name: c, image: i}]}\n"),
		"list":         podListYAML(3),
		"syntax error": []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n\tbad: tab\n"),
		"empty":        []byte("# nothing\n"),
		"null":         []byte("~\n"),
	}
	files, err := filepath.Glob("../examples/*/manifests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example manifests (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		corpus[f] = b
	}
	seeds, _ := filepath.Glob("testdata/fuzz/*/*")
	for _, f := range seeds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// "go test fuzz v1\n[]byte(\"...\")\n"
		_, v, ok := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if s, found := strings.CutPrefix(v, "[]byte("); ok && found {
			if u, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
				corpus[f] = []byte(u)
			}
		}
	}
	return corpus
}

// manifestToJSONBefore is manifestToJSON as it was before the streaming
// conversion: every bound checked the same way, and go-yaml's YAMLToJSON.
func manifestToJSONBefore(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, ErrEmptyManifest
	}
	if trimmed[0] == '{' {
		return manifestToJSON(data) // the JSON path did not change
	}
	if n := countYAMLNodes(data); n > MaxManifestNodes {
		return nil, ErrTooLarge
	}
	if bytes.IndexByte(data, '*') >= 0 {
		if err := checkYAMLShape(data); err != nil {
			return nil, err
		}
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	if len(js) > maxExpandedSize {
		return nil, ErrTooLarge
	}
	if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return nil, ErrEmptyManifest
	}
	if err := scanJSON(js); err != nil {
		return nil, err
	}
	return js, nil
}

// The streaming conversion decodes every manifest of the corpus exactly as
// go-yaml's YAMLToJSON did before: the same JSON value, the same pods
// (field for field, UIDs included) or an error for both.
func TestDecodeYAMLSameAsBefore(t *testing.T) {
	for name, in := range yamlCorpus(t) {
		t.Run(name, func(t *testing.T) {
			before, beforeErr := manifestToJSONBefore(in)
			after, afterErr := manifestToJSON(in)
			if (beforeErr != nil) != (afterErr != nil) {
				t.Fatalf("before: %v, after: %v", beforeErr, afterErr)
			}
			if beforeErr != nil {
				return
			}
			var b, a any
			if err := json.Unmarshal(before, &b); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(after, &a); err != nil {
				t.Fatalf("invalid JSON %s: %v", after, err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("JSON differs:\nbefore %s\nafter  %s", before, after)
			}
			opts := fileOpts("/etc/pods/" + filepath.Base(name))
			podsBefore, errBefore := DecodeStaticPods(before, opts)
			podsAfter, errAfter := DecodeStaticPods(in, opts)
			if (errBefore != nil) != (errAfter != nil) {
				t.Fatalf("pods: before %v, after %v", errBefore, errAfter)
			}
			if !reflect.DeepEqual(podsBefore, podsAfter) {
				t.Fatalf("pods differ:\nbefore %+v\nafter  %+v", podsBefore, podsAfter)
			}
		})
	}
}

// countingBody is a request body that records whether it was read.
type countingBody struct {
	r    *strings.Reader
	read *atomic.Int32
	once sync.Once
}

func (b *countingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { b.read.Add(1) })
	return b.r.Read(p)
}

// Concurrent pushes hold one body in memory at a time (issue 23, item 2):
// the handler takes its body slot before it reads a body, so while one push
// is being decoded and delivered, the others wait without having read a
// byte. The peak is then one body (MaxBodyBytes) plus one decode
// (yamlAllocLimit), however many pushes arrive at once. Before the fix
// every waiting push had read its whole body first (4 pushes of 10 MiB
// peaked at 4.1 GB with go-yaml's tree).
func TestPushConcurrentBodiesOneAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := make(chan kubetypes.PodUpdate) // unbuffered: the first push waits in send
		h, _ := newTestPush(t, PushConfig{Out: out})
		var read atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		codes := make([]int, 4)
		for i := range codes {
			wg.Go(func() {
				body := strings.Replace(staticYAML, "name: web", fmt.Sprintf("name: web%d", i), 1)
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", &countingBody{r: strings.NewReader(body), read: &read})
				req.Header.Set("Content-Type", "application/yaml")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				codes[i] = rec.Code
			})
		}
		synctest.Wait()
		if n := read.Load(); n != 1 {
			t.Errorf("%d bodies read while the first push waits to be delivered, want 1", n)
		}
		cancel()
		wg.Wait()
		for i, c := range codes {
			if c != http.StatusServiceUnavailable {
				t.Errorf("push %d = %d, want 503 once its client has gone", i, c)
			}
		}
	})
}

// BenchmarkDecodeYAMLvsJSON is the cost of decoding the same content as
// YAML and as JSON at 1 and 10 MiB, each through DecodeStaticPods: a
// PodList (accepted; 3,000 pods with a 3 KB annotation each at 10 MiB, under
// MaxPodsPerManifest), and a flat list of short strings (refused: no kind).
func BenchmarkDecodeYAMLvsJSON(b *testing.B) {
	for _, size := range []int{1 << 20, 10<<20 - 64<<10} {
		pods := 1000
		if size > 1<<20 {
			pods = 3000
		}
		note := strings.Repeat("x", size/pods-420)
		list := bytes.ReplaceAll(podListYAML(pods), []byte("    labels:"), []byte("    annotations: {note: "+note+"}\n    labels:"))
		listJSON, err := yaml.YAMLToJSON(list)
		if err != nil {
			b.Fatal(err)
		}
		flat := repeatYAML(size, "values:\n", "- abcdefghijklmnopqrstuvwxyz0123\n", "")
		flatJSON, err := yaml.YAMLToJSON(flat)
		if err != nil {
			b.Fatal(err)
		}
		for _, in := range []struct {
			name string
			data []byte
		}{
			{"podlist/yaml", list}, {"podlist/json", listJSON}, {"flat/yaml", flat}, {"flat/json", flatJSON},
		} {
			b.Run(fmt.Sprintf("%s/%dMiB", in.name, (size+1<<19)>>20), func(b *testing.B) {
				b.SetBytes(int64(len(in.data)))
				b.ReportAllocs()
				for b.Loop() {
					_, err := DecodeStaticPods(in.data, fileOpts("/b.yaml"))
					if strings.HasPrefix(in.name, "podlist") && err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// readBody returns the body whatever the declared length says, and
// allocates the body's size once when the length is declared (io.ReadAll's
// 2.2 times when it is not).
func TestReadBody(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	for _, tc := range []struct {
		name   string
		length int64
		max    float64 // bytes allocated per body byte
	}{
		{"declared", int64(len(body)), 1.01},
		{"undeclared", -1, 2.5},
		{"declared too short", 100, 4},
		{"declared too long", int64(len(body)) * 2, 1.01}, // capped at max
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			var err error
			alloc := allocsOf(func() {
				got, err = readBody(bytes.NewReader(body), tc.length, int64(len(body)))
			})
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("read %d bytes (%v), want the %d of the body", len(got), err, len(body))
			}
			if raceEnabled && tc.max > 1.01 {
				return // io.ReadAll's part: its pooled buffers are dropped under -race
			}
			if limit := uint64(tc.max * float64(len(body))); alloc > limit {
				t.Errorf("allocated %d for %d bytes, want at most %d", alloc, len(body), limit)
			}
		})
	}
	for _, in := range []string{"", "x", strings.Repeat("y", 511), strings.Repeat("z", 513)} {
		got, err := readBody(strings.NewReader(in), int64(len(in)), 1<<20)
		if err != nil || string(got) != in {
			t.Errorf("readBody(%d bytes) = %d bytes, %v", len(in), len(got), err)
		}
	}
}
