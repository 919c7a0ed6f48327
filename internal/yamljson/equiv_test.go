package yamljson

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// same reports whether Convert and sigs.k8s.io/yaml's YAMLToJSON agree on
// in: the same JSON value, or both an error.
func same(t *testing.T, in string) {
	t.Helper()
	lim := Limits{MaxDepth: 100, MaxNodes: 1 << 16, MaxAliases: 1000, MaxOutput: 1 << 20}
	got, gerr := Convert([]byte(in), lim)
	if merr := Measure([]byte(in), lim); gerr == nil && merr != nil {
		t.Fatalf("%q: Convert succeeded, Measure failed: %v", in, merr)
	}
	if errors.Is(gerr, ErrUnsupported) || errors.Is(gerr, ErrTooLarge) || errors.Is(gerr, ErrTooDeep) {
		return // YAMLToJSON may take exponential time on what the limits refuse
	}
	want, werr := yaml.YAMLToJSON([]byte(in))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%q: YAMLToJSON err %v, Convert err %v (got %s)", in, werr, gerr, got)
	}
	if werr != nil {
		return
	}
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%q: Convert gave invalid JSON %s: %v", in, got, err)
	}
	if !reflect.DeepEqual(w, g) {
		t.Fatalf("%q:\nYAMLToJSON %s\nConvert    %s", in, want, got)
	}
}

func TestSameAsYAMLToJSON(t *testing.T) {
	for _, in := range []string{
		"", "a", "~", "---\n", "a: 1\n", "- a\n- b\n", "[a, b, {c: d}]", "{a: [1, 2.5, -3e4, 0x1F, 017, 0b101, 1_000, .5, +7]}",
		"a: yes\nb: No\nc: on\nd: ~\ne: null\nf: \"null\"\ng: 'x'\n", "a: |\n  line1\n  line2\nb: >-\n  folded\n  text\n",
		"a: &x {b: c}\nd: *x\n", "a: &x [1]\nb: [*x, *x]\n", "1: a\ntrue: b\n", "a: 2001-12-14\n", "a: 1e400\n", "a: 99999999999999999999\n",
		"a: \"\\x01\\t\\u00e9\"\n", "a: b\n---\nc: d\n", "a: [\n", "a: *y\n", "a: &x [*x]\n", "a: .nan\n", "- -1.5e-9\n- 1e21\n- 123456789.25\n",
		"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: {app: web}\nspec:\n  containers:\n  - name: c\n    image: i\n    resources: {limits: {cpu: 0.5, memory: 1e3}}\n",
	} {
		same(t, in)
	}
}

func FuzzSameAsYAMLToJSON(f *testing.F) {
	for _, s := range []string{"a: 1\n", "- a\n- b\n", "[a, {b: c}]", "a: &x {b: c}\nd: *x\n", "a: |\n  x\n", "a: 0x1F\nb: 1e3\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if len(in) > 4096 {
			return
		}
		same(t, in)
	})
}
