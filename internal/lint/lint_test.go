package lint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
)

// TestModule is the house-rules check over the whole nodekit module.
func TestModule(t *testing.T) {
	root, err := FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	findings, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Error(f)
	}
	if len(findings) > 0 {
		t.Logf("%d house-rule findings; see internal/lint/doc.go for the rules and the //nodekit:allow opt-out", len(findings))
	}
}

// got is a finding reduced to what the rule tests compare.
type got struct {
	File string
	Line int
	Rule string
}

func check(t *testing.T, files map[string]string) []got {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, src := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(src)}
	}
	findings, err := CheckFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	out := []got{}
	for _, f := range findings {
		if f.Message == "" {
			t.Errorf("finding without a message: %v", f)
		}
		out = append(out, got{f.File, f.Line, f.Rule})
	}
	return out
}

func expect(t *testing.T, files map[string]string, want ...got) {
	t.Helper()
	if want == nil {
		want = []got{}
	}
	if g := check(t, files); !reflect.DeepEqual(g, want) {
		t.Errorf("findings:\n got  %v\n want %v", g, want)
	}
}

const sleepTest = `package p

import (
	"testing"
	"time"
)

func TestX(t *testing.T) {
	time.Sleep(time.Second)
}
`

func TestSleep(t *testing.T) {
	t.Run("unit test", func(t *testing.T) {
		expect(t, map[string]string{"p/x_test.go": sleepTest}, got{"p/x_test.go", 9, RuleSleep})
	})
	for _, tc := range []struct {
		build   string
		flagged bool
	}{
		{"//go:build e2e", false},
		{"//go:build e2e && linux", false},
		{"//go:build linux && (e2e || integration) && !integration", false},
		{"//go:build e2e || linux", true},
		{"//go:build !e2e", true},
		{"//go:build linux", true},
		{"//go:build integration", true},
	} {
		t.Run(tc.build, func(t *testing.T) {
			var want []got
			if tc.flagged {
				want = []got{{"p/x_test.go", 11, RuleSleep}}
			}
			expect(t, map[string]string{"p/x_test.go": tc.build + "\n\n" + sleepTest}, want...)
		})
	}
	t.Run("aliased import", func(t *testing.T) {
		expect(t, map[string]string{"p/x_test.go": `package p

import (
	"testing"
	tm "time"
)

func TestX(t *testing.T) { f := tm.Sleep; f(0) }
`}, got{"p/x_test.go", 8, RuleSleep})
	})
	t.Run("shadowed by a local", func(t *testing.T) {
		expect(t, map[string]string{"p/x_test.go": `package p

import (
	"testing"
	"time"
)

type fake struct{}

func (fake) Sleep(time.Duration) {}

func TestX(t *testing.T) {
	time := fake{}
	time.Sleep(1)
}
`})
	})
	t.Run("non-test file is not this rule", func(t *testing.T) {
		expect(t, map[string]string{"p/x.go": "package p\n\nimport \"time\"\n\nfunc W() { time.Sleep(1) }\n"})
	})
}

const libCode = `package p

import (
	"context"
	"time"
)

func A() context.Context { return context.Background() }
func B() context.Context { return context.TODO() }
func C() time.Time       { return time.Now() }
func D() time.Duration   { return time.Since(time.Time{}) }
func E() time.Duration   { return time.Until(time.Time{}) }
`

func TestContextAndClock(t *testing.T) {
	t.Run("library", func(t *testing.T) {
		expect(t, map[string]string{"runtime/p.go": libCode},
			got{"runtime/p.go", 8, RuleContext},
			got{"runtime/p.go", 9, RuleContext},
			got{"runtime/p.go", 10, RuleClock},
			got{"runtime/p.go", 11, RuleClock},
			got{"runtime/p.go", 12, RuleClock},
		)
	})
	t.Run("top-level file", func(t *testing.T) {
		expect(t, map[string]string{"builder.go": libCode},
			got{"builder.go", 8, RuleContext},
			got{"builder.go", 9, RuleContext},
			got{"builder.go", 10, RuleClock},
			got{"builder.go", 11, RuleClock},
			got{"builder.go", 12, RuleClock},
		)
	})
	for _, name := range []string{
		"runtime/p_test.go",
		"hack/tool/p.go",
		"examples/standalone/p.go",
		"benchmarks/p.go",
		"test/e2e/p.go",
	} {
		t.Run("exempt "+name, func(t *testing.T) {
			expect(t, map[string]string{name: libCode})
		})
	}
	t.Run("exempt package main", func(t *testing.T) {
		expect(t, map[string]string{"cmd/agent/main.go": strings.Replace(libCode, "package p", "package main", 1)})
	})
	t.Run("aliased import", func(t *testing.T) {
		expect(t, map[string]string{"p/p.go": "package p\n\nimport ctx \"context\"\n\nvar _ = ctx.Background\n"},
			got{"p/p.go", 5, RuleContext})
	})
	t.Run("other functions are fine", func(t *testing.T) {
		expect(t, map[string]string{"p/p.go": `package p

import (
	"context"
	"time"
)

func A(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, time.Second) }
func B(t time.Time) time.Time { return t.Add(time.Minute) }
`})
	})
}

func TestOptOut(t *testing.T) {
	src := `package p

import (
	"context"
	"time"
)

func A() time.Time { return time.Now() } //nodekit:allow clock stamp shown to humans only

//nodekit:allow context detached from the caller on purpose
func B() context.Context { return context.Background() }

//nodekit:allow clock too far away

func C() time.Time { return time.Now() }

//nodekit:allow context the wrong rule
func D() time.Time { return time.Now() }

//nodekit:allow clock
func E() time.Time { return time.Now() }

//nodekit:allow sleep not an opt-out rule
func F() {}

//nodekit:allow
func G() {}

//nodekit:allowed is another directive
func H() {}
`
	expect(t, map[string]string{"p/p.go": src},
		got{"p/p.go", 15, RuleClock},
		got{"p/p.go", 18, RuleClock},
		got{"p/p.go", 20, RuleAllow},
		got{"p/p.go", 21, RuleClock},
		got{"p/p.go", 23, RuleAllow},
		got{"p/p.go", 26, RuleAllow},
	)
}

func TestOptOutReasonRequiredMessage(t *testing.T) {
	findings := CheckFile("p/p.go", []byte("package p\n\nimport \"time\"\n\n//nodekit:allow clock\nvar _ = time.Now\n"))
	var msgs []string
	for _, f := range findings {
		msgs = append(msgs, f.String())
	}
	want := []string{
		"p/p.go:5: [allow] //nodekit:allow clock needs a reason",
		"p/p.go:6: [clock] time.Now in library code: use the injected clock.Clock",
	}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("got %q\nwant %q", msgs, want)
	}
}

func TestInit(t *testing.T) {
	src := "package p\n\nfunc init() {}\n\ntype T struct{}\n\nfunc (T) init() {}\n"
	for _, name := range []string{"p/p.go", "p/p_test.go", "hack/x/main.go", "benchmarks/b_test.go", "examples/e/main.go"} {
		t.Run(name, func(t *testing.T) {
			expect(t, map[string]string{name: src}, got{name, 3, RuleInit})
		})
	}
}

func TestKubernetesImport(t *testing.T) {
	src := "package p\n\nimport _ \"k8s.io/kubernetes/pkg/kubelet\"\n"
	expect(t, map[string]string{
		"p/p.go":               src,
		"p/p_test.go":          src,
		"examples/e/e.go":      src,
		"benchmarks/b_test.go": src,
		"benchmarks/b.go":      src,
		"go.mod":               "module m\n\nrequire (\n\tk8s.io/api v0.36.3\n\tk8s.io/kubernetes v1.36.3 // indirect\n)\n",
		"benchmarks/go.mod":    "module m/benchmarks\n\nrequire k8s.io/kubernetes v1.36.3\n",
	},
		got{"examples/e/e.go", 3, RuleKubernetes},
		got{"go.mod", 5, RuleKubernetes},
		got{"p/p.go", 3, RuleKubernetes},
		got{"p/p_test.go", 3, RuleKubernetes},
	)
	t.Run("go.mod comment and other module", func(t *testing.T) {
		expect(t, map[string]string{"go.mod": "module m\n\n// not k8s.io/kubernetes\nrequire k8s.io/kubernetes-sigs v1.0.0\n"})
	})
	t.Run("replace", func(t *testing.T) {
		expect(t, map[string]string{"go.mod": "module m\n\nreplace k8s.io/kubernetes => ../k\n"}, got{"go.mod", 3, RuleKubernetes})
	})
}

func TestClientGo(t *testing.T) {
	src := "package p\n\nimport (\n\t_ \"k8s.io/client-go/kubernetes\"\n\t_ \"k8s.io/client-go\"\n)\n"
	expect(t, map[string]string{
		"podconfig/p.go":                  src,
		"podconfig/apiserver/p.go":        src,
		"nodestatus/apiserversink/p.go":   src,
		"podconfig/p_test.go":             src,
		"examples/cluster/main.go":        src,
		"test/e2e/p.go":                   src,
		"hack/x/main.go":                  src,
		"benchmarks/p.go":                 src,
		"nodestatus/podconfig_api_srv.go": src,
	},
		got{"nodestatus/podconfig_api_srv.go", 4, RuleClientGo},
		got{"nodestatus/podconfig_api_srv.go", 5, RuleClientGo},
		got{"podconfig/p.go", 4, RuleClientGo},
		got{"podconfig/p.go", 5, RuleClientGo},
	)
}

func TestTestingImport(t *testing.T) {
	src := func(pkg string) string { return "package " + pkg + "\n\nimport \"testing\"\n\nvar _ testing.TB\n" }
	expect(t, map[string]string{
		"runtime/helpers.go":            src("runtime"),
		"runtime/runtimetest/suite.go":  src("runtimetest"),
		"runtime/x_test.go":             src("runtime_test"),
		"runtime/fake/fake.go":          src("fake"),
		"internal/lint/fixture_test.go": src("lint"),
	},
		got{"runtime/fake/fake.go", 3, RuleTesting},
		got{"runtime/helpers.go", 3, RuleTesting},
	)
	t.Run("testing subpackages are not this rule", func(t *testing.T) {
		expect(t, map[string]string{"p/p.go": "package p\n\nimport _ \"testing/fstest\"\n"})
	})
}

func TestSkippedDirs(t *testing.T) {
	bad := "package p\n\nfunc init() {}\n"
	expect(t, map[string]string{
		"p/testdata/bad.go":       bad,
		"testdata/bad.go":         bad,
		"vendor/x/bad.go":         bad,
		".git/x/bad.go":           bad,
		"_scratch/bad.go":         bad,
		"p/notgo.txt":             "func init() {}",
		"p/testdata_not_a_dir.go": "package p\n",
	})
}

func TestParseError(t *testing.T) {
	expect(t, map[string]string{"p/p.go": "package p\n\nfunc {\n"}, got{"p/p.go", 3, RuleParse})
}

func TestSortedAcrossFiles(t *testing.T) {
	bad := "package p\n\nfunc init() {}\n"
	g := check(t, map[string]string{"b/b.go": bad, "a/z.go": bad, "a/a.go": "package p\n\n\n\nfunc init() {}\n" + "func init() {}\n"})
	want := []got{{"a/a.go", 5, RuleInit}, {"a/a.go", 6, RuleInit}, {"a/z.go", 3, RuleInit}, {"b/b.go", 3, RuleInit}}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("got %v, want %v", g, want)
	}
}

func TestFindModuleRoot(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := FindModuleRoot(sub)
	if err != nil || root != dir {
		t.Errorf("FindModuleRoot(%s) = %q, %v; want %q", sub, root, err, dir)
	}
	// A directory with no go.mod at or above it: only / and the temp dir are
	// above a fresh temp dir, and neither may hold one.
	empty := t.TempDir()
	if _, err := os.Stat(filepath.Join(filepath.Dir(empty), "go.mod")); err == nil {
		t.Skip("a go.mod sits above the temp dir")
	}
	if _, err := os.Stat("/go.mod"); err == nil {
		t.Skip("a go.mod sits at /")
	}
	if _, err := FindModuleRoot(empty); !errors.Is(err, ErrNoModule) {
		t.Errorf("FindModuleRoot(%s) err = %v, want ErrNoModule", empty, err)
	}
}

func TestCheckOnDisk(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"go.mod":              "module m\n",
		"p/p.go":              "package p\n\nfunc init() {}\n",
		"p/testdata/x/bad.go": "package x\n\nfunc init() {}\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	findings, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(findings) != 1 || findings[0].String() != "p/p.go:3: [init] func init() is not allowed (no init side effects)" {
		t.Errorf("findings = %v", findings)
	}
	if _, err := Check(filepath.Join(dir, "missing")); err == nil {
		t.Error("Check of a missing directory: want an error")
	}
}

// TestNestedModuleSkipped: a directory with its own go.mod (a build tool,
// the benchmarks module) is not part of the library and is not checked.
func TestNestedModuleSkipped(t *testing.T) {
	fsys := fstest.MapFS{
		"go.mod":       {Data: []byte("module example.com/m\n")},
		"tool/go.mod":  {Data: []byte("module example.com/tool\n\nrequire k8s.io/kubernetes v1.36.3\n")},
		"tool/main.go": {Data: []byte("package main\n\nimport _ \"k8s.io/kubernetes/cmd/kube-apiserver/app\"\n")},
		"lib/lib.go":   {Data: []byte("package lib\n\nimport _ \"k8s.io/kubernetes/pkg/kubelet\"\n")},
	}
	got, err := CheckFS(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].File != "lib/lib.go" {
		t.Fatalf("findings = %v, want exactly the library file's import", got)
	}
}
