package logs

import (
	"bytes"
	"fmt"
	"time"
)

// Stream is the output stream a record came from.
type Stream uint8

// The two streams of the CRI log format.
const (
	Stdout Stream = iota
	Stderr
)

func (s Stream) String() string {
	if s == Stderr {
		return "stderr"
	}
	return "stdout"
}

// Record is one line of a CRI log file:
//
//	2016-10-06T00:17:09.669794202Z stdout P log content 1
//	2016-10-06T00:17:09.669794203Z stderr F log content 2
//
// A partial record (tag P) is a piece of a longer line whose end follows
// in later records of the same stream; a full record (F) ends the line.
type Record struct {
	Time    time.Time
	Stream  Stream
	Partial bool
	// Msg is the content without the record's trailing newline. It
	// aliases the parsed line.
	Msg []byte
}

// maxTimestampLen bounds the timestamp field before it is parsed: the
// longest RFC 3339 time with nanoseconds and a numeric zone is 35 bytes.
const maxTimestampLen = 40

// header splits a record into its fields without parsing the timestamp:
// the timestamp text, the stream, whether it is partial and the message
// (the trailing newline removed).
func header(line []byte) (ts []byte, s Stream, partial bool, msg []byte, err error) {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	i := bytes.IndexByte(line, ' ')
	if i <= 0 || i > maxTimestampLen {
		return nil, 0, false, nil, fmt.Errorf("%w: no timestamp", ErrBadRecord)
	}
	ts, rest := line[:i], line[i+1:]
	switch {
	case bytes.HasPrefix(rest, []byte("stdout ")):
		s, rest = Stdout, rest[len("stdout "):]
	case bytes.HasPrefix(rest, []byte("stderr ")):
		s, rest = Stderr, rest[len("stderr "):]
	default:
		return nil, 0, false, nil, fmt.Errorf("%w: no stream", ErrBadRecord)
	}
	// The tag field: "P" or "F", possibly followed by ":"-separated tags
	// (kept forward compatible, as the CRI says); the message follows
	// one space. A record ending right after its tag has an empty message.
	end := bytes.IndexByte(rest, ' ')
	tags := rest
	if end >= 0 {
		tags, msg = rest[:end], rest[end+1:]
	} else {
		msg = rest[len(rest):]
	}
	first := tags
	if j := bytes.IndexByte(tags, ':'); j >= 0 {
		first = tags[:j]
	}
	switch string(first) {
	case "P":
		partial = true
	case "F":
	default:
		return nil, 0, false, nil, fmt.Errorf("%w: tag %q is neither P nor F", ErrBadRecord, first)
	}
	return ts, s, partial, msg, nil
}

// parseTime reads a record's timestamp (RFC 3339 with or without
// fractional seconds).
func parseTime(ts []byte) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: timestamp %q", ErrBadRecord, ts)
	}
	return t, nil
}

// ParseRecord parses one line of a CRI log file (with or without its
// trailing newline). It returns an error wrapping ErrBadRecord for a line
// that is not in the format.
func ParseRecord(line []byte) (Record, error) {
	ts, s, partial, msg, err := header(line)
	if err != nil {
		return Record{}, err
	}
	t, err := parseTime(ts)
	if err != nil {
		return Record{}, err
	}
	return Record{Time: t, Stream: s, Partial: partial, Msg: msg}, nil
}

// timeFormatOut is how the timestamps option prints a line's time: the
// fixed-width RFC 3339 with nanoseconds the kubelet prints.
const timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"

// AppendRecord appends one record in the CRI log format to b (the way
// containerd writes it) and returns the extended buffer. msg must not hold
// a newline.
func AppendRecord(b []byte, t time.Time, s Stream, partial bool, msg []byte) []byte {
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, ' ')
	b = append(b, s.String()...)
	if partial {
		b = append(b, " P "...)
	} else {
		b = append(b, " F "...)
	}
	b = append(b, msg...)
	return append(b, '\n')
}
