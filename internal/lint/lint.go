package lint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/parser"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Rule names, as they appear in findings and in //nodekit:allow comments.
const (
	RuleSleep      = "sleep"
	RuleContext    = "context"
	RuleClock      = "clock"
	RuleInit       = "init"
	RuleKubernetes = "kubernetes"
	RuleClientGo   = "client-go"
	RuleTesting    = "testing"
	// RuleAllow reports a malformed //nodekit:allow comment.
	RuleAllow = "allow"
	// RuleParse reports a Go file that does not parse.
	RuleParse = "parse"
)

const allowDirective = "//nodekit:allow"

// maxConstraintTags bounds the tags of one //go:build line the checker
// enumerates; a line with more is treated as buildable without e2e.
const maxConstraintTags = 16

// Finding is one broken rule at a place in the source.
type Finding struct {
	// File is the slash-separated path relative to the module root.
	File string
	// Line is 1-based; 0 when the finding is about the whole file.
	Line int
	// Rule is one of the Rule* names.
	Rule    string
	Message string
}

// String formats the finding as file:line: [rule] message.
func (f Finding) String() string {
	return fmt.Sprintf("%s:%d: [%s] %s", f.File, f.Line, f.Rule, f.Message)
}

// FindModuleRoot returns the first directory at or above dir holding a go.mod.
func FindModuleRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if st, err := os.Stat(filepath.Join(abs, "go.mod")); err == nil && !st.IsDir() {
			return abs, nil
		}
		parent := filepath.Dir(abs)
		if parent == abs {
			return "", fmt.Errorf("%w at or above %s", ErrNoModule, dir)
		}
		abs = parent
	}
}

// Check walks the module rooted at root and returns every finding, sorted by
// file, line and rule.
func Check(root string) ([]Finding, error) {
	return CheckFS(os.DirFS(root))
}

// CheckFS is Check over any file tree whose root is the module root.
func CheckFS(fsys fs.FS) ([]Finding, error) {
	var findings []Finding
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && skipDir(d.Name()) {
				return fs.SkipDir
			}
			// A nested module (benchmarks/, hack/apiserver/) is not part of
			// the library: `go build ./...` skips it, and so do the rules.
			if p != "." {
				if st, err := fs.Stat(fsys, path.Join(p, "go.mod")); err == nil && !st.IsDir() {
					return fs.SkipDir
				}
			}
			return nil
		}
		switch {
		case p == "go.mod":
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			findings = append(findings, checkGoMod(p, src)...)
		case strings.HasSuffix(p, ".go"):
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			findings = append(findings, CheckFile(p, src)...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortFindings(findings)
	return findings, nil
}

func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

func sortFindings(list []Finding) {
	sort.SliceStable(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Rule < b.Rule
	})
}

// checkGoMod reports k8s.io/kubernetes in a require or replace of the root go.mod.
func checkGoMod(name string, src []byte) []Finding {
	var out []Finding
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.Index(text, "//"); i >= 0 {
			text = text[:i]
		}
		for _, field := range strings.Fields(text) {
			if strings.Trim(field, `"`) == "k8s.io/kubernetes" {
				out = append(out, Finding{File: name, Line: line, Rule: RuleKubernetes,
					Message: "the root module must not depend on k8s.io/kubernetes (only benchmarks/ may)"})
				break
			}
		}
	}
	return out
}

// fileKind says where a file sits and so which rules apply to it.
type fileKind struct {
	test       bool // _test.go
	main       bool // package main
	topDir     string
	pkgDir     string
	pkgName    string
	e2eOnly    bool // cannot be built without the e2e tag
	benchmarks bool
}

func (k fileKind) library() bool {
	if k.test || k.main {
		return false
	}
	switch k.topDir {
	case "hack", "examples", "benchmarks", "test":
		return false
	}
	return true
}

// clientGoAllowed: client-go belongs to the API-server parts only.
func (k fileKind) clientGoAllowed() bool {
	if k.test {
		return true
	}
	switch k.topDir {
	case "hack", "examples", "benchmarks", "test":
		return true
	}
	return strings.Contains(k.pkgDir, "apiserver")
}

// allow is one //nodekit:allow comment.
type allow struct {
	line   int
	rule   string
	reason string
}

// CheckFile applies every rule to one Go source file; name is its
// slash-separated path relative to the module root and decides which rules
// apply.
func CheckFile(name string, src []byte) []Finding {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		line := 0
		var list scanner.ErrorList
		if errors.As(err, &list) && len(list) > 0 {
			line = list[0].Pos.Line
		}
		return []Finding{{File: name, Line: line, Rule: RuleParse, Message: err.Error()}}
	}

	kind := fileKind{
		test:    strings.HasSuffix(name, "_test.go"),
		pkgName: f.Name.Name,
		pkgDir:  path.Dir(name),
	}
	kind.main = kind.pkgName == "main"
	if i := strings.IndexByte(name, '/'); i >= 0 {
		kind.topDir = name[:i]
	}
	kind.benchmarks = kind.topDir == "benchmarks"
	kind.e2eOnly = e2eOnly(f)

	c := &fileChecker{fset: fset, name: name, kind: kind}
	c.collectAllows(f)
	c.checkImports(f)
	c.checkDecls(f)
	return c.findings
}

type fileChecker struct {
	fset     *token.FileSet
	name     string
	kind     fileKind
	allows   []allow
	findings []Finding
}

func (c *fileChecker) add(pos token.Pos, rule, format string, args ...any) {
	c.findings = append(c.findings, Finding{
		File: c.name, Line: c.fset.Position(pos).Line, Rule: rule, Message: fmt.Sprintf(format, args...),
	})
}

// optOutable lists the rules an //nodekit:allow comment may name.
func optOutable(rule string) bool {
	return rule == RuleContext || rule == RuleClock
}

func (c *fileChecker) collectAllows(f *ast.File) {
	for _, group := range f.Comments {
		for _, cm := range group.List {
			if !strings.HasPrefix(cm.Text, allowDirective) {
				continue
			}
			rest := strings.TrimPrefix(cm.Text, allowDirective)
			if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				continue // some other directive, e.g. //nodekit:allowed
			}
			fields := strings.Fields(rest)
			switch {
			case len(fields) == 0:
				c.add(cm.Pos(), RuleAllow, "%s needs a rule and a reason", allowDirective)
			case !optOutable(fields[0]):
				c.add(cm.Pos(), RuleAllow, "%s %s: only the %q and %q rules can be opted out of", allowDirective, fields[0], RuleContext, RuleClock)
			case len(fields) == 1:
				c.add(cm.Pos(), RuleAllow, "%s %s needs a reason", allowDirective, fields[0])
			default:
				c.allows = append(c.allows, allow{
					line: c.fset.Position(cm.Pos()).Line, rule: fields[0], reason: strings.Join(fields[1:], " "),
				})
			}
		}
	}
}

// allowed reports whether an opt-out with a reason for rule sits on line or the line before.
func (c *fileChecker) allowed(pos token.Pos, rule string) bool {
	line := c.fset.Position(pos).Line
	for _, a := range c.allows {
		if a.rule == rule && (a.line == line || a.line == line-1) {
			return true
		}
	}
	return false
}

func (c *fileChecker) checkImports(f *ast.File) {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		switch {
		case p == "k8s.io/kubernetes" || strings.HasPrefix(p, "k8s.io/kubernetes/"):
			if !c.kind.benchmarks {
				c.add(imp.Pos(), RuleKubernetes, "import of %s: only benchmarks/ may import k8s.io/kubernetes", p)
			}
		case p == "k8s.io/client-go" || strings.HasPrefix(p, "k8s.io/client-go/"):
			if !c.kind.clientGoAllowed() {
				c.add(imp.Pos(), RuleClientGo, "import of %s outside an apiserver package", p)
			}
		case p == "testing":
			if !c.kind.test && !strings.HasSuffix(c.kind.pkgName, "test") {
				c.add(imp.Pos(), RuleTesting, "non-test file of package %s imports \"testing\" (test helpers go in _test.go files or a *test package)", c.kind.pkgName)
			}
		}
	}
}

// importName returns the name under which f imports path, or "" if it does
// not (or only as _ or .).
func importName(f *ast.File, importPath string) string {
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil || p != importPath {
			continue
		}
		if imp.Name == nil {
			return path.Base(importPath)
		}
		if imp.Name.Name == "_" || imp.Name.Name == "." {
			return ""
		}
		return imp.Name.Name
	}
	return ""
}

func (c *fileChecker) checkDecls(f *ast.File) {
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
			c.add(fd.Pos(), RuleInit, "func init() is not allowed (no init side effects)")
		}
	}

	timeName := importName(f, "time")
	ctxName := importName(f, "context")
	checkSleep := c.kind.test && !c.kind.e2eOnly
	library := c.kind.library()
	if timeName == "" && ctxName == "" {
		return
	}
	if !checkSleep && !library {
		return
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		id, ok := sel.X.(*ast.Ident)
		if !ok || id.Obj != nil { // Obj != nil: a local declaration shadows the package
			return true
		}
		switch {
		case timeName != "" && id.Name == timeName:
			switch sel.Sel.Name {
			case "Sleep":
				if checkSleep {
					c.add(sel.Pos(), RuleSleep, "time.Sleep in a unit test: use a fake clock or testing/synctest (e2e-only files may poll)")
				}
			case "Now", "Since", "Until":
				if library && !c.allowed(sel.Pos(), RuleClock) {
					c.add(sel.Pos(), RuleClock, "time.%s in library code: use the injected clock.Clock", sel.Sel.Name)
				}
			}
		case ctxName != "" && id.Name == ctxName:
			switch sel.Sel.Name {
			case "Background", "TODO":
				if library && !c.allowed(sel.Pos(), RuleContext) {
					c.add(sel.Pos(), RuleContext, "context.%s in library code: take a ctx from the caller", sel.Sel.Name)
				}
			}
		}
		return true
	})
}

// e2eOnly reports whether the file's //go:build line can only be satisfied
// with the e2e tag set: no assignment of the other tags with e2e unset
// satisfies it.
func e2eOnly(f *ast.File) bool {
	expr := buildConstraint(f)
	if expr == nil {
		return false
	}
	var tags []string
	seen := map[string]bool{"e2e": true}
	collectTags(expr, func(tag string) {
		if !seen[tag] {
			seen[tag] = true
			tags = append(tags, tag)
		}
	})
	if len(tags) > maxConstraintTags {
		return false
	}
	for mask := 0; mask < 1<<len(tags); mask++ {
		ok := expr.Eval(func(tag string) bool {
			for i, t := range tags {
				if t == tag {
					return mask&(1<<i) != 0
				}
			}
			return false // e2e
		})
		if ok {
			return false
		}
	}
	return true
}

// buildConstraint returns the parsed //go:build line before the package clause, if any.
func buildConstraint(f *ast.File) constraint.Expr {
	for _, group := range f.Comments {
		if group.Pos() >= f.Package {
			break
		}
		for _, cm := range group.List {
			if constraint.IsGoBuild(cm.Text) {
				expr, err := constraint.Parse(cm.Text)
				if err == nil {
					return expr
				}
			}
		}
	}
	return nil
}

func collectTags(e constraint.Expr, add func(string)) {
	switch x := e.(type) {
	case *constraint.TagExpr:
		add(x.Tag)
	case *constraint.NotExpr:
		collectTags(x.X, add)
	case *constraint.AndExpr:
		collectTags(x.X, add)
		collectTags(x.Y, add)
	case *constraint.OrExpr:
		collectTags(x.X, add)
		collectTags(x.Y, add)
	}
}
