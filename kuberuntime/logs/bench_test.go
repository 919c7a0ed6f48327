package logs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readChars is the bytes this process has read through read system calls
// (rchar of /proc/self/io), or -1 when unavailable.
func readChars() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return -1
}

// BenchmarkTail100Of100MB reads the last 100 lines of a 100 MB log and
// reports the bytes read from files per read (read-B/op): a few blocks
// at the end, not the file.
func BenchmarkTail100Of100MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var size int64
	var rec []byte
	for i := 0; size < 100<<20; i++ {
		rec = AppendRecord(rec[:0], t0, Stream(i%2), i%7 == 0, fmt.Appendf(nil, "line %d of a chatty container, padded to look like a real log line", i))
		w.Write(rec)
		size += int64(len(rec))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	r, err := NewReader(ReaderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	opts := Options{TailLines: 100}
	b.ReportAllocs()
	b.ResetTimer()
	before := readChars()
	for b.Loop() {
		out.Reset()
		if err := r.ReadLogs(context.Background(), path, opts, nil, &out, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if before >= 0 {
		b.ReportMetric(float64(readChars()-before)/float64(b.N), "read-B/op")
	}
	if n := strings.Count(out.String(), "\n"); n != 100 {
		b.Fatalf("tail 100 wrote %d lines", n)
	}
}
