// Package lint enforces nodekit's house rules on its own source. Its test,
// TestModule, walks the module with go/parser and go/ast and fails with one
// file:line finding per broken rule, so `go test ./...` keeps the rules.
//
// The rules, by the name used in findings and opt-outs:
//
//   - sleep: time.Sleep in a _test.go file that can be built without the e2e
//     build tag (unit tests use a fake clock or testing/synctest; e2e tests
//     poll a condition with a deadline).
//   - context: context.Background or context.TODO in library code.
//   - clock: time.Now, time.Since or time.Until in library code (use the
//     injected k8s.io/utils/clock.Clock).
//   - init: any func init(), tests included.
//   - kubernetes: an import of k8s.io/kubernetes outside benchmarks/, or
//     k8s.io/kubernetes named in the root go.mod.
//   - client-go: an import of k8s.io/client-go outside packages whose path
//     contains "apiserver" (tests, examples/, hack/, test/ and benchmarks/ may).
//   - testing: a non-test file importing "testing" in a package whose name
//     does not end in "test" (such as runtimetest).
//
// Library code is every non-test file outside package main and outside the
// top-level directories hack/, examples/, benchmarks/ and test/. Directories
// named testdata or vendor, and hidden ones, are not walked.
//
// The context and clock rules accept an explicit opt-out on the same line as
// the call or on the line before it, and the reason is required:
//
//	//nodekit:allow clock the default for a nil Clock is read once at start-up
//
// An opt-out without a reason, or naming another rule, is itself a finding
// (rule "allow").
//
// Use it from a test:
//
//	root, _ := lint.FindModuleRoot(".")
//	findings, err := lint.Check(root)
//	for _, f := range findings {
//		t.Error(f)
//	}
package lint
