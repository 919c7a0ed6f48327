package logs

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
)

const (
	// tailBlock is how much a backward scan reads at a time.
	tailBlock = 32 << 10
	// headerWindow is how many bytes of a record its header needs (the
	// timestamp, stream and tag fields).
	headerWindow = 128
	// maxRecord bounds one record; the rest of a longer one is dropped
	// (containerd writes at most 16 KiB per record).
	maxRecord = 1 << 20
)

// isLine reports whether the record whose first bytes are hdr ends a line
// of a selected stream (a full record).
func isLine(hdr []byte, sel [2]bool) bool {
	_, s, partial, _, err := header(hdr)
	return err == nil && !partial && sel[s]
}

// tailStart finds where the last n lines of the selected streams begin in
// the first size bytes of f, reading backwards from the end only as far as
// it must. found is how many lines start at or after off (n when the file
// holds more than n; otherwise off is 0 and found is all the file has).
func tailStart(f io.ReaderAt, size, n int64, sel [2]bool) (off, found int64, err error) {
	if n < 0 {
		return 0, 0, nil
	}
	buf := make([]byte, tailBlock+headerWindow)
	recEnd := size // end of the record being looked at (exclusive)
	// A record is counted when the newline before it is found (or the
	// file's start is reached): its header is then in buf.
	for blockEnd := size; blockEnd > 0; {
		blockStart := max(blockEnd-tailBlock, 0)
		readEnd := min(blockEnd+headerWindow, size)
		b := buf[:readEnd-blockStart]
		if _, err := f.ReadAt(b, blockStart); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("logs: tail: %w", err)
		}
		// Newlines in [blockStart, blockEnd), from the end, that are not
		// the newline ending recEnd's record itself.
		for i := blockEnd - blockStart - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			p := blockStart + i
			if p >= recEnd-1 {
				continue
			}
			rs := p + 1
			hdr := b[rs-blockStart : min(rs+headerWindow, recEnd)-blockStart]
			if isLine(hdr, sel) {
				if found == n {
					return recEnd, found, nil
				}
				found++
			}
			recEnd = rs
		}
		blockEnd = blockStart
	}
	// The file's first record.
	if recEnd > 0 {
		hdr := make([]byte, min(headerWindow, recEnd))
		if _, err := f.ReadAt(hdr, 0); err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, fmt.Errorf("logs: tail: %w", err)
		}
		if isLine(hdr, sel) {
			if found == n {
				return recEnd, found, nil
			}
			found++
		}
	}
	return 0, found, nil
}

// recordReader yields the records of a log stream one at a time; a
// record longer than maxRecord is cut there.
type recordReader struct {
	r       *bufio.Reader
	pending []byte
	drop    bool // inside a record longer than maxRecord
}

func newRecordReader(r io.Reader) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next complete record (with its newline) or, at the end
// of what can be read now, io.EOF; the incomplete rest is kept for the
// next call (after more is written) or for rest.
func (rr *recordReader) next() ([]byte, error) {
	for {
		line, err := rr.r.ReadSlice('\n')
		switch {
		case err == nil && len(rr.pending) == 0 && !rr.drop:
			return line, nil
		case err == nil:
			if rr.drop {
				rr.drop = false
				rec := rr.pending
				rr.pending = rr.pending[:0]
				if len(rec) == 0 {
					continue
				}
				return rec, nil
			}
			rr.pending = append(rr.pending, line...)
			rec := rr.pending
			rr.pending = rr.pending[:0]
			return rec, nil
		case errors.Is(err, bufio.ErrBufferFull) || errors.Is(err, io.EOF):
			if !rr.drop {
				rr.pending = append(rr.pending, line...)
				if len(rr.pending) > maxRecord {
					rr.pending = rr.pending[:maxRecord]
					rr.drop = true
				}
			}
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
		default:
			return nil, fmt.Errorf("logs: read: %w", err)
		}
	}
}

// rest returns the incomplete record read so far (nil if none) and forgets it.
func (rr *recordReader) rest() []byte {
	if len(rr.pending) == 0 {
		rr.drop = false
		return nil
	}
	rec := rr.pending
	rr.pending = nil
	rr.drop = false
	return rec
}

// reset makes rr read from r, forgetting what it buffered.
func (rr *recordReader) reset(r io.Reader) {
	rr.r.Reset(r)
	rr.pending = rr.pending[:0]
	rr.drop = false
}

// countLines counts the lines of the selected streams in a record stream.
func countLines(r io.Reader, sel [2]bool) (int64, error) {
	rr := newRecordReader(r)
	var n int64
	for {
		rec, err := rr.next()
		if errors.Is(err, io.EOF) {
			if rec := rr.rest(); rec != nil && isLine(rec, sel) {
				n++
			}
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if isLine(rec, sel) {
			n++
		}
	}
}

// openGzip opens a compressed rotated file for reading.
func openGzip(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("logs: %s: %w", path, err)
	}
	return &gzipFile{Reader: zr, f: f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g *gzipFile) Close() error { return errors.Join(g.Reader.Close(), g.f.Close()) }

// skipLines reads records from rr until n lines of the selected streams
// have gone by (the start of a tail inside a compressed file).
func skipLines(rr *recordReader, n int64, sel [2]bool) error {
	for n > 0 {
		rec, err := rr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				rr.rest()
				return nil
			}
			return err
		}
		if isLine(rec, sel) {
			n--
		}
	}
	return nil
}
