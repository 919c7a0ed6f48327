package lint

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// importRule is one line of README's import graph: the packages matching
// pkg may import the nodekit packages matching one of allow.
type importRule struct {
	line  int
	pkg   string
	allow []string
}

// matches reports whether the module-relative package path p ("." for
// the root) matches pattern: "x" is x alone, "x/..." is x and every
// package below it, "*" is anything.
func matches(pattern, p string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// readImportGraph reads the block between the import-graph markers of
// README.md.
func readImportGraph(t *testing.T, readme string) []importRule {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rules []importRule
	in := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- import-graph:begin -->":
			in = true
			continue
		case line == "<!-- import-graph:end -->":
			in = false
			continue
		case !in || line == "" || strings.HasPrefix(line, "```"):
			continue
		}
		pkg, allow, ok := strings.Cut(line, "->")
		if !ok {
			t.Fatalf("README.md:%d: %q is not `package -> imports`", n, line)
		}
		rules = append(rules, importRule{line: n, pkg: strings.TrimSpace(pkg), allow: strings.Fields(allow)})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("README.md has no import graph between <!-- import-graph:begin --> and <!-- import-graph:end -->")
	}
	return rules
}

// moduleImports returns, per package directory of the module (relative,
// "." for the root), the nodekit packages its non-test files import.
// benchmarks/ is a module of its own and is left out.
func moduleImports(t *testing.T, root, module string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (skipDir(d.Name()) || rel == "benchmarks") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := path.Dir(rel)
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			switch {
			case ip == module:
				out[dir]["."] = true
			case strings.HasPrefix(ip, module+"/"):
				out[dir][strings.TrimPrefix(ip, module+"/")] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportGraph holds the architecture: every package's imports of other
// nodekit packages are allowed by the first line of README's import graph
// that matches the package, every package is matched by a line, and every
// line matches a package.
func TestImportGraph(t *testing.T) {
	root, err := FindModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := ""
	for _, l := range strings.Split(string(mod), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			module = strings.TrimSpace(m)
			break
		}
	}
	rules := readImportGraph(t, filepath.Join(root, "README.md"))
	imports := moduleImports(t, root, module)
	used := make([]bool, len(rules))
	var dirs []string
	for d := range imports {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		ri := -1
		for i, r := range rules {
			if matches(r.pkg, dir) {
				ri = i
				break
			}
		}
		if ri < 0 {
			t.Errorf("package %s is in no line of README's import graph", dir)
			continue
		}
		used[ri] = true
		var bad []string
		for imp := range imports[dir] {
			ok := false
			for _, a := range rules[ri].allow {
				if matches(a, imp) {
					ok = true
					break
				}
			}
			if !ok {
				bad = append(bad, imp)
			}
		}
		sort.Strings(bad)
		if len(bad) > 0 {
			t.Errorf("package %s imports %s, which README.md:%d (%s -> %s) does not allow",
				dir, strings.Join(bad, ", "), rules[ri].line, rules[ri].pkg, strings.Join(rules[ri].allow, " "))
		}
	}
	for i, r := range rules {
		if !used[i] {
			t.Errorf("README.md:%d: %s matches no package (or only packages an earlier line matches)", r.line, r.pkg)
		}
	}
}

// Patterns match as README's import graph documents.
func TestImportGraphMatches(t *testing.T) {
	for _, tc := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"syncloop", "syncloop", true},
		{"syncloop", "syncloop/x", false},
		{"podstatus/...", "podstatus", true},
		{"podstatus/...", "podstatus/apiserver", true},
		{"podstatus/...", "podstatusx", false},
		{"*", "pleg", true},
		{".", ".", true},
		{".", "pleg", false},
	} {
		if got := matches(tc.pattern, tc.pkg); got != tc.want {
			t.Errorf("matches(%q, %q) = %v, want %v", tc.pattern, tc.pkg, got, tc.want)
		}
	}
}
