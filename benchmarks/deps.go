// Package benchmarks holds side-by-side benchmarks of nodekit packages and
// the kubelet packages they replace. The code lives in _test.go files; see
// README.md.
package benchmarks
