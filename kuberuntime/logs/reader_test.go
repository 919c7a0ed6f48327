package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// rec is one record for writeLog.
type rec struct {
	s       Stream
	partial bool
	msg     string
	at      time.Duration // after t0
}

func encode(recs []rec) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendRecord(b, t0.Add(r.at), r.s, r.partial, []byte(r.msg))
	}
	return b
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func writeGz(t testing.TB, path string, data []byte) {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	writeFile(t, path, b.Bytes())
}

// lines makes full stdout records "line <from>" ... "line <to>", one
// second apart from second from.
func lines(from, to int) []rec {
	var out []rec
	for i := from; i <= to; i++ {
		out = append(out, rec{s: Stdout, msg: fmt.Sprintf("line %d", i), at: time.Duration(i) * time.Second})
	}
	return out
}

func want(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func newTestReader(t testing.TB) *Reader {
	r, err := NewReader(ReaderConfig{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func read(t testing.TB, r *Reader, path string, opts Options) (string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if err := r.ReadLogs(context.Background(), path, opts, nil, &out, &errb); err != nil {
		t.Fatalf("ReadLogs(%+v): %v", opts, err)
	}
	return out.String(), errb.String()
}

func all() Options { return Options{TailLines: AllLines} }

func TestReadPartialLinesBothStreams(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c", "0.log")
	writeFile(t, path, encode([]rec{
		{s: Stdout, msg: "out one"},
		{s: Stdout, partial: true, msg: "long "},
		{s: Stderr, partial: true, msg: "err "},
		{s: Stdout, partial: true, msg: "out "},
		{s: Stderr, msg: "line"},
		{s: Stdout, msg: "line"},
		{s: Stderr, msg: ""},
	}))
	r := newTestReader(t)
	out, errs := read(t, r, path, all())
	if out != "out one\nlong out line\n" || errs != "err line\n\n" {
		t.Fatalf("stdout %q stderr %q", out, errs)
	}
	// One stream only: a nil writer skips the other.
	var only bytes.Buffer
	if err := r.ReadLogs(context.Background(), path, all(), nil, nil, &only); err != nil || only.String() != "err line\n\n" {
		t.Fatalf("stderr only: %q %v", only.String(), err)
	}
	// Tail counts a joined line once, and only the streams read.
	out, errs = read(t, r, path, Options{TailLines: 1})
	if out != "" || errs != "\n" {
		t.Fatalf("tail 1: stdout %q stderr %q", out, errs)
	}
	// A tail starts at a record: a line of the other stream begun before
	// it (interleaved partial records) shows from there, as the kubelet's.
	out, errs = read(t, r, path, Options{TailLines: 2})
	if out != "line\n" || errs != "\n" {
		t.Fatalf("tail 2: stdout %q stderr %q", out, errs)
	}
	only.Reset()
	if err := r.ReadLogs(context.Background(), path, Options{TailLines: 1}, nil, &only, nil); err != nil || only.String() != "long out line\n" {
		t.Fatalf("stdout only, tail 1: %q %v", only.String(), err)
	}
}

func TestReadTimestampsOncePerLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path, encode([]rec{
		{s: Stdout, partial: true, msg: "a", at: time.Second},
		{s: Stdout, msg: "b", at: 2 * time.Second},
		{s: Stdout, msg: "c", at: 3 * time.Second},
	}))
	out, _ := read(t, newTestReader(t), path, Options{TailLines: AllLines, Timestamps: true})
	if out != "2026-11-26T12:00:01.000000000Z ab\n2026-11-26T12:00:03.000000000Z c\n" {
		t.Fatalf("timestamps: %q", out)
	}
}

func TestReadSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	recs := lines(1, 10)
	// A line begun before since is skipped whole, its later pieces too.
	recs = append(recs, rec{s: Stdout, partial: true, msg: "old ", at: 10 * time.Second}, rec{s: Stdout, msg: "end", at: 20 * time.Second})
	writeFile(t, path, encode(recs))
	r := newTestReader(t)
	out, _ := read(t, r, path, Options{TailLines: AllLines, Since: t0.Add(7 * time.Second)})
	if out != want(7, 10)+"old end\n" {
		t.Fatalf("since 7s: %q", out)
	}
	out, _ = read(t, r, path, Options{TailLines: AllLines, Since: t0.Add(15 * time.Second)})
	if out != "" {
		t.Fatalf("since 15s: %q", out)
	}
	// Tail first, then since (as the kubelet).
	out, _ = read(t, r, path, Options{TailLines: 5, Since: t0.Add(9 * time.Second)})
	// (the last 5 lines are 7-10 and "old end")
	if out != want(9, 10)+"old end\n" {
		t.Fatalf("tail 5 since 9s: %q", out)
	}
}

func TestReadLimitBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path, encode(lines(1, 10)))
	r := newTestReader(t)
	for _, n := range []int64{1, 7, 8, 20, 1000} {
		out, _ := read(t, r, path, Options{TailLines: AllLines, LimitBytes: n})
		full := want(1, 10)
		if int64(len(full)) > n {
			full = full[:n]
		}
		if out != full {
			t.Fatalf("limit %d: %q, want %q", n, out, full)
		}
	}
	// The limit counts both streams together.
	path2 := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path2, encode([]rec{{s: Stdout, msg: "aaaa"}, {s: Stderr, msg: "bbbb"}, {s: Stdout, msg: "cccc"}}))
	out, errs := read(t, r, path2, Options{TailLines: AllLines, LimitBytes: 7})
	if out != "aaaa\n" || errs != "bb" {
		t.Fatalf("limit across streams: %q %q", out, errs)
	}
}

// rotationSet writes lines 1-10 compressed, 11-20 rotated, 21-25 live,
// plus the leftovers a crash leaves (a .tmp, an uncompressed twin).
func rotationSet(t *testing.T) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeGz(t, path+".20261126-110000.gz", encode(lines(1, 10)))
	writeFile(t, path+".20261126-110000", []byte("twin of a compressed file: not read\n"))
	writeFile(t, path+".20261126-113000.gz.tmp", []byte("half a compression"))
	writeFile(t, path+".20261126-113000", encode(lines(11, 20)))
	writeFile(t, path, encode(lines(21, 25)))
	writeFile(t, filepath.Join(dir, "1.log"), []byte("another instance: not read\n"))
	return path
}

func TestTailAcrossRotatedAndCompressedFiles(t *testing.T) {
	path := rotationSet(t)
	r := newTestReader(t)
	for _, tc := range []struct {
		tail     int64
		from, to int
	}{
		{0, 1, 0}, {3, 23, 25}, {5, 21, 25}, {6, 20, 25}, {8, 18, 25}, {15, 11, 25}, {17, 9, 25}, {25, 1, 25}, {100, 1, 25},
	} {
		out, _ := read(t, r, path, Options{TailLines: tc.tail})
		if out != want(tc.from, tc.to) {
			t.Errorf("tail %d: %q", tc.tail, out)
		}
	}
	out, _ := read(t, r, path, all())
	if out != want(1, 25) {
		t.Errorf("all: %q", out)
	}
	files, err := Files(path)
	if err != nil || len(files) != 3 || !strings.HasSuffix(files[0], ".gz") || files[2] != path {
		t.Fatalf("Files: %v %v", files, err)
	}
}

func TestTailWithoutLiveFile(t *testing.T) {
	path := rotationSet(t)
	os.Remove(path)
	out, _ := read(t, newTestReader(t), path, Options{TailLines: 12})
	if out != want(9, 20) {
		t.Fatalf("tail 12 without the live file: %q", out)
	}
	out, _ = read(t, newTestReader(t), filepath.Join(t.TempDir(), "none.log"), all())
	if out != "" {
		t.Fatalf("no files: %q", out)
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r *os.File
	n int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

func TestTailReadsOnlyTheEnd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	var b []byte
	for i := range 200000 {
		b = AppendRecord(b, t0, Stdout, false, fmt.Appendf(nil, "line %d with some padding to make it longer", i))
	}
	writeFile(t, path, b)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &countingReaderAt{r: f}
	off, found, err := tailStart(c, int64(len(b)), 100, [2]bool{true, true})
	if err != nil || found != 100 {
		t.Fatalf("tailStart: %d %d %v", off, found, err)
	}
	if c.n > 2*(tailBlock+headerWindow) {
		t.Fatalf("read %d bytes of a %d-byte file to tail 100 lines", c.n, len(b))
	}
	out, _ := read(t, newTestReader(t), path, Options{TailLines: 100})
	if !strings.HasPrefix(out, "line 199900 ") || strings.Count(out, "\n") != 100 {
		t.Fatalf("tail 100: %.60q... %d lines", out, strings.Count(out, "\n"))
	}
}

// naiveTail is the reference: the output of tail n lines computed by
// reading every record forwards.
func naiveTail(recs []rec, n int64, sel [2]bool) []rec {
	if n < 0 {
		return recs
	}
	var ends []int // index after each full record of a selected stream
	for i, r := range recs {
		if !r.partial && sel[r.s] {
			ends = append(ends, i+1)
		}
	}
	if int64(len(ends)) <= n {
		return recs
	}
	return recs[ends[int64(len(ends))-n-1]:]
}

func randomRecs(rng *rand.Rand, n int) []rec {
	recs := make([]rec, n)
	for i := range recs {
		msg := strings.Repeat("x", rng.IntN(3)*rng.IntN(200))
		if rng.IntN(50) == 0 {
			msg = strings.Repeat("y", tailBlock+rng.IntN(100)) // a record crossing blocks
		}
		recs[i] = rec{s: Stream(rng.IntN(2)), partial: rng.IntN(3) == 0, msg: msg, at: time.Duration(i)}
	}
	return recs
}

func TestTailStartAgreesWithForwardCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for iter := range 200 {
		recs := randomRecs(rng, rng.IntN(60))
		data := encode(recs)
		path := filepath.Join(dir, fmt.Sprintf("%d.log", iter))
		writeFile(t, path, data)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, sel := range [][2]bool{{true, true}, {true, false}, {false, true}} {
			n := int64(rng.IntN(40))
			off, _, err := tailStart(f, int64(len(data)), n, sel)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(data[off:]), string(encode(naiveTail(recs, n, sel))); got != want {
				t.Fatalf("iter %d tail %d sel %v: start %d, want output of %d bytes", iter, n, sel, off, len(want))
			}
		}
		f.Close()
	}
}

func TestReadOptionsRefused(t *testing.T) {
	r := newTestReader(t)
	for _, o := range []Options{{TailLines: -2}, {TailLines: AllLines, LimitBytes: -1}} {
		if err := r.ReadLogs(context.Background(), "/x/0.log", o, nil, nil, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if err := r.ReadLogs(context.Background(), "rel/0.log", all(), nil, nil, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("relative path: %v", err)
	}
	if _, err := NewReader(ReaderConfig{PollInterval: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative PollInterval: %v", err)
	}
}
