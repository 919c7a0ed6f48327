package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The program runs and prints the pod Running, and stays within the 25
// lines the README promises (code lines outside the import block: no
// blank or comment lines).
func TestMinimalRuns(t *testing.T) {
	out, err := exec.Command("go", "run", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	want := "web-node1: Running running: true\nagent stopped, error: <nil>\n"
	if string(out) != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
}

func TestMinimalIsShort(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := codeLines(string(src)); n > 25 {
		t.Errorf("main.go has %d code lines outside its imports, want at most 25", n)
	}
}

// The README shows main.go as it is, from its package clause on.
func TestMinimalInReadme(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	body := src[bytes.Index(src, []byte("package main")):]
	if !bytes.Contains(readme, body) {
		t.Error("README.md does not show examples/minimal/main.go from its package clause on, as it is")
	}
}

func codeLines(src string) int {
	n, inImport := 0, false
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "import (":
			inImport = true
		case inImport:
			inImport = l != ")"
		case l == "", strings.HasPrefix(l, "//"):
		default:
			n++
		}
	}
	return n
}
