package logs

import (
	"errors"
	"io"
	"time"
)

// errLimit stops a read when LimitBytes have been written.
var errLimit = errors.New("logs: byte limit reached")

// emitter turns records into output lines: partial records are written as
// they come (a line of any length costs no memory), the time prefix and
// the since filter apply once per line, at its first record.
type emitter struct {
	w          [2]io.Writer
	since      time.Time
	timestamps bool
	remain     int64 // < 0: no limit
	atStart    [2]bool
	skip       [2]bool
	buf        []byte
	bad        int // records that did not parse
}

func newEmitter(opts Options, stdout, stderr io.Writer) *emitter {
	e := &emitter{w: [2]io.Writer{stdout, stderr}, since: opts.Since, timestamps: opts.Timestamps, remain: -1}
	if opts.LimitBytes > 0 {
		e.remain = opts.LimitBytes
	}
	e.atStart = [2]bool{true, true}
	return e
}

// selected reports which streams have a writer.
func (e *emitter) selected() [2]bool { return [2]bool{e.w[0] != nil, e.w[1] != nil} }

// record writes one CRI record. It returns errLimit once the byte limit is
// reached and the writer's error if a write fails.
func (e *emitter) record(line []byte) error {
	ts, s, partial, msg, err := header(line)
	if err != nil {
		e.bad++
		return nil
	}
	w := e.w[s]
	if w == nil {
		return nil
	}
	start := e.atStart[s]
	e.atStart[s] = !partial
	out := e.buf[:0]
	if start {
		e.skip[s] = false
		if !e.since.IsZero() || e.timestamps {
			t, err := parseTime(ts)
			if err != nil {
				e.bad++
				e.skip[s] = true
				return nil
			}
			if t.Before(e.since) {
				e.skip[s] = true
			}
			if e.timestamps && !e.skip[s] {
				out = t.AppendFormat(out, timeFormatOut)
				out = append(out, ' ')
			}
		}
	}
	if e.skip[s] {
		return nil
	}
	out = append(out, msg...)
	if !partial {
		out = append(out, '\n')
	}
	e.buf = out
	return e.write(w, out)
}

func (e *emitter) write(w io.Writer, out []byte) error {
	if e.remain >= 0 && int64(len(out)) > e.remain {
		out = out[:e.remain]
	}
	n, err := w.Write(out)
	if e.remain >= 0 {
		e.remain -= int64(n)
	}
	if err != nil {
		return err
	}
	if n < len(out) {
		return io.ErrShortWrite
	}
	if e.remain == 0 {
		return errLimit
	}
	return nil
}
