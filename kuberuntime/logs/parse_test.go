package logs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseRecord(t *testing.T) {
	ts := time.Date(2016, 10, 6, 0, 17, 9, 669794202, time.UTC)
	for _, tc := range []struct {
		line    string
		stream  Stream
		partial bool
		msg     string
		bad     bool
	}{
		{line: "2016-10-06T00:17:09.669794202Z stdout F log content 1\n", stream: Stdout, msg: "log content 1"},
		{line: "2016-10-06T00:17:09.669794202Z stderr P part", stream: Stderr, partial: true, msg: "part"},
		{line: "2016-10-06T00:17:09.669794202Z stdout F \n", stream: Stdout, msg: ""},
		{line: "2016-10-06T00:17:09.669794202Z stdout F", stream: Stdout, msg: ""},
		{line: "2016-10-06T00:17:09.669794202Z stdout F:future:tags  two spaces\n", stream: Stdout, msg: " two spaces"},
		{line: "2016-10-06T02:17:09.669794202+02:00 stdout F zone\n", stream: Stdout, msg: "zone"},
		{line: "2016-10-06T00:17:09.669794202Z stdin F x\n", bad: true},
		{line: "2016-10-06T00:17:09.669794202Z stdout X x\n", bad: true},
		{line: "2016-10-06T00:17:09.669794202Z stdout PF x\n", bad: true},
		{line: "not-a-time stdout F x\n", bad: true},
		{line: "stdout F x\n", bad: true},
		{line: "\n", bad: true},
		{line: "", bad: true},
		{line: "2016-10-06T00:17:09.669794202Z0000000000000000000000000000 stdout F x\n", bad: true},
	} {
		rec, err := ParseRecord([]byte(tc.line))
		if tc.bad {
			if !errors.Is(err, ErrBadRecord) {
				t.Errorf("%q: err %v, want ErrBadRecord", tc.line, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if !rec.Time.Equal(ts) || rec.Stream != tc.stream || rec.Partial != tc.partial || string(rec.Msg) != tc.msg {
			t.Errorf("%q: got %v %v %v %q", tc.line, rec.Time, rec.Stream, rec.Partial, rec.Msg)
		}
	}
}

func TestAppendRecordRoundTrip(t *testing.T) {
	ts := time.Date(2026, 11, 26, 22, 0, 0, 5, time.UTC)
	b := AppendRecord(nil, ts, Stderr, true, []byte("hello world"))
	if string(b) != "2026-11-26T22:00:00.000000005Z stderr P hello world\n" {
		t.Fatalf("AppendRecord: %q", b)
	}
	rec, err := ParseRecord(b)
	if err != nil || !rec.Time.Equal(ts) || rec.Stream != Stderr || !rec.Partial || string(rec.Msg) != "hello world" {
		t.Fatalf("round trip: %+v %v", rec, err)
	}
}

// FuzzParseRecord: any input parses or fails with ErrBadRecord, never
// panics; what parses writes back to a record that parses the same.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stdout F log content 1\n"))
	f.Add([]byte("2016-10-06T00:17:09Z stderr P:x:y part"))
	f.Add([]byte("2016-10-06T00:17:09.669794202+02:00 stdout F \n"))
	f.Add([]byte(" stdout F x"))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseRecord(line)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		if len(rec.Msg) > len(line) {
			t.Fatalf("message longer than the line")
		}
		for _, c := range rec.Msg {
			if c == '\n' {
				return // a message with a newline can't be written back as one record
			}
		}
		back := AppendRecord(nil, rec.Time, rec.Stream, rec.Partial, rec.Msg)
		rec2, err := ParseRecord(back)
		if err != nil || !rec2.Time.Equal(rec.Time) || rec2.Stream != rec.Stream || rec2.Partial != rec.Partial || string(rec2.Msg) != string(rec.Msg) {
			t.Fatalf("round trip of %q: %q: %+v %v", line, back, rec2, err)
		}
	})
}

// FuzzReadLogs: any file content reads without error or panic (lines not
// in the format are skipped), and with any tail the output is the end of
// the whole output, as each record's output does not depend on those
// before it without since.
func FuzzReadLogs(f *testing.F) {
	f.Add([]byte("2016-10-06T00:17:09.669794202Z stdout F log content 1\n2016-10-06T00:17:09Z stderr P a\n2016-10-06T00:17:10Z stderr F b\n"), uint8(1), false)
	f.Add([]byte("garbage\n\n2016-10-06T00:17:09Z stdout F \nno newline at the end"), uint8(2), true)
	f.Add([]byte("2016-10-06T00:17:09Z stdout P x\n2016-10-06T00:17:09Z stderr P y\n2016-10-06T00:17:09Z stdout F z"), uint8(0), true)
	dir := f.TempDir()
	r, err := NewReader(ReaderConfig{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte, tail uint8, timestamps bool) {
		path := filepath.Join(dir, "0.log")
		if err := os.WriteFile(path, data, 0o640); err != nil {
			t.Fatal(err)
		}
		var full, part bytes.Buffer
		if err := r.ReadLogs(context.Background(), path, Options{TailLines: AllLines, Timestamps: timestamps}, nil, &full, &full); err != nil {
			t.Fatalf("read all: %v", err)
		}
		if err := r.ReadLogs(context.Background(), path, Options{TailLines: int64(tail), Timestamps: timestamps}, nil, &part, &part); err != nil {
			t.Fatalf("tail %d: %v", tail, err)
		}
		if !timestamps && !bytes.HasSuffix(full.Bytes(), part.Bytes()) {
			t.Fatalf("tail %d output %q is not the end of %q", tail, part.Bytes(), full.Bytes())
		}
		if n := bytes.Count(part.Bytes(), []byte{'\n'}); n > int(tail) {
			t.Fatalf("tail %d wrote %d lines", tail, n)
		}
	})
}
