package logs

import (
	"errors"
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
