package yamljson

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestConvertLimits(t *testing.T) {
	lim := Limits{MaxDepth: 5, MaxNodes: 50, MaxAliases: 3, MaxOutput: 200}
	for _, tc := range []struct {
		name, in string
		want     error
		msg      string
	}{
		{"depth", "[[[[[[a]]]]]]", ErrTooDeep, "line 1: more than 5 levels"},
		{"depth through an alias", "a: &x [[[a]]]\nb: [[*x]]\n", ErrTooDeep, "through alias *x"},
		{"nodes", "[" + strings.Repeat("a, ", 60) + "a]", ErrTooLarge, "more than 50 values"},
		{"nodes through aliases", "a: &x [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]\nb: [*x, *x, *x]\n", ErrTooLarge, "more than 50 values"},
		{"aliases", "a: &x 1\nb: [*x, *x, *x, *x]\n", ErrTooLarge, "more than 3 alias references"},
		{"anchors", "[&a 1, &b 2, &c 3, &d 4]", ErrTooLarge, "more than 3 anchors"},
		{"output", "a: &x " + strings.Repeat("y", 80) + "\nb: [*x, *x]\n", ErrTooLarge, "beyond 200 bytes"},
		{"output without aliases", strings.Repeat("z", 250), ErrTooLarge, "more than 200 bytes"},
		{"tag", "a: !!int 1\n", ErrUnsupported, "tag"},
		{"merge key", "a: &x {b: c}\nd: {<<: *x}\n", ErrUnsupported, "merge key"},
		{"duplicate key", "a: 1\nb: 2\na: 3\n", ErrUnsupported, "twice"},
		{"duplicate after conversion", "1: a\n\"1\": b\n", ErrUnsupported, "twice"},
		{"null key", "~: a\n", ErrUnsupported, "not a string"},
		{"complex key", "? [a]\n: b\n", ErrUnsupported, "not a scalar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert([]byte(tc.in), lim)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v saying %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	for in, want := range map[string]string{
		"a: *x\n":                "yaml: unknown anchor 'x' referenced",
		"a: &x [*x]\n":           "yaml: anchor 'x' value contains itself",
		"a: [\n":                 "yaml: line 1: did not find expected node content",
		"a: 1\n\tb: 2\n":         "yaml: line 2: found a tab character that violates indentation",
		"a: .inf\n":              "json: unsupported value: +Inf",
		"a: &x 1\nb: &x [*x]\n":  "yaml: anchor 'x' value contains itself",
		"- &x a\n- &x [*x]\n- x": "yaml: anchor 'x' value contains itself",
	} {
		_, err := Convert([]byte(in), Limits{})
		if err == nil || err.Error() != want {
			t.Errorf("Convert(%q) = %v, want %q", in, err, want)
		}
	}
}

// Sentinels given in Limits are the ones wrapped.
func TestConvertOwnSentinels(t *testing.T) {
	big, deep := errors.New("big"), errors.New("deep")
	lim := Limits{MaxDepth: 1, MaxNodes: 2, TooLarge: big, TooDeep: deep}
	if _, err := Convert([]byte("[[a]]"), lim); !errors.Is(err, deep) {
		t.Errorf("deep: %v", err)
	}
	if _, err := Convert([]byte("[a, b, c]"), lim); !errors.Is(err, big) {
		t.Errorf("large: %v", err)
	}
}

// A redefined anchor names its latest node, as in go-yaml: the inner &y
// was defined after the outer one started.
func TestConvertAnchorRedefined(t *testing.T) {
	js, err := Convert([]byte("a: &x 1\nb: &x 2\nc: *x\nd: &y [&y 3, *y]\ne: *y\n"), Limits{})
	if want := `{"a":1,"b":2,"c":2,"d":[3,3],"e":3}`; err != nil || string(js) != want {
		t.Fatalf("got %s %v, want %s", js, err, want)
	}
	same(t, "a: &x 1\nb: &x 2\nc: *x\nd: &y [&y 3, *y]\ne: *y\n")
}

// Measure bounds what Convert leaves to a full decoder: merge keys count
// as the aliases they are, tags and keys of any kind are measured.
func TestMeasure(t *testing.T) {
	lim := Limits{MaxDepth: 10, MaxNodes: 100, MaxAliases: 50, MaxOutput: 1000}
	var bomb strings.Builder
	bomb.WriteString("a0: &a0 {k: v}\n")
	for i := 1; i < 8; i++ {
		fmt.Fprintf(&bomb, "a%d: &a%d\n  <<: [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	for _, tc := range []struct {
		name, in string
		want     error
	}{
		{"merge bomb", bomb.String(), ErrTooLarge},
		{"tagged", "a: !!seq &x [1, 2]\nb: !custom [*x]\n", nil},
		{"complex keys", "? [a, &k b]\n: *k\n? {c: d}\n: e\n*k : f\n", nil},
		{"duplicate keys", "a: 1\na: 2\n", nil},
		{"deep through a key", "? " + strings.Repeat("[", 11) + strings.Repeat("]", 11) + "\n: v\n", ErrTooDeep},
		{"unknown anchor", "a: *nope\n", nil}, // go-yaml reports it
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Measure([]byte(tc.in), lim)
			if tc.want == nil && tc.name == "unknown anchor" {
				if err == nil {
					t.Fatal("an unknown anchor measured as fine")
				}
				return
			}
			if !errors.Is(err, tc.want) && err != tc.want {
				t.Fatalf("Measure = %v, want %v", err, tc.want)
			}
			if _, cerr := Convert([]byte(tc.in), lim); tc.want == nil && !errors.Is(cerr, ErrUnsupported) && cerr != nil {
				t.Fatalf("Convert = %v", cerr)
			}
		})
	}
}
