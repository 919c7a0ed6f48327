package logs

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Options say what part of a log to read.
type Options struct {
	// TailLines, when >= 0, starts the output that many lines before the
	// end (lines of the streams read, a partial line joined with its end
	// counting once; rotated files count too). -1 reads everything kept.
	TailLines int64
	// LimitBytes, when > 0, stops the output after that many bytes (the
	// last line may be cut). 0 means no limit.
	LimitBytes int64
	// Since, when not zero, skips the lines written before it.
	Since time.Time
	// Timestamps prefixes each line with its time (RFC 3339, nanoseconds,
	// fixed width) and a space.
	Timestamps bool
	// Follow keeps reading what the container writes after the end, across
	// rotations, until the container stops running or ctx ends.
	Follow bool
}

// AllLines is Options.TailLines for "no tail".
const AllLines int64 = -1

// OptionsFromPod checks o the way the API server validates
// PodLogOptions and turns it into Options; now resolves sinceSeconds. The
// error wraps ErrInvalidOptions and names the field. o.Stream is checked
// (All, Stdout or Stderr; one stream only without tailLines) but choosing
// the stream is the caller's: a nil writer in Reader.ReadLogs.
func OptionsFromPod(o *v1.PodLogOptions, now time.Time) (Options, error) {
	opts := Options{TailLines: AllLines}
	if o == nil {
		return opts, nil
	}
	if o.TailLines != nil {
		if *o.TailLines < 0 {
			return Options{}, fmt.Errorf("%w: tailLines %d must be greater than or equal to 0", ErrInvalidOptions, *o.TailLines)
		}
		opts.TailLines = *o.TailLines
	}
	if o.LimitBytes != nil {
		if *o.LimitBytes < 1 {
			return Options{}, fmt.Errorf("%w: limitBytes %d must be greater than 0", ErrInvalidOptions, *o.LimitBytes)
		}
		opts.LimitBytes = *o.LimitBytes
	}
	if o.SinceSeconds != nil && o.SinceTime != nil {
		return Options{}, fmt.Errorf("%w: at most one of sinceSeconds or sinceTime may be specified", ErrInvalidOptions)
	}
	if o.SinceSeconds != nil {
		if *o.SinceSeconds < 1 {
			return Options{}, fmt.Errorf("%w: sinceSeconds %d must be greater than 0", ErrInvalidOptions, *o.SinceSeconds)
		}
		// Bounded so the subtraction can't overflow (about 292 years).
		secs := min(*o.SinceSeconds, int64(1<<63-1)/int64(time.Second))
		opts.Since = now.Add(-time.Duration(secs) * time.Second)
	}
	if o.SinceTime != nil {
		opts.Since = o.SinceTime.Time
	}
	if o.Stream != nil {
		switch *o.Stream {
		case v1.LogStreamAll:
		case v1.LogStreamStdout, v1.LogStreamStderr:
			if o.TailLines != nil {
				return Options{}, fmt.Errorf("%w: tailLines can only be used with stream %q", ErrInvalidOptions, v1.LogStreamAll)
			}
		default:
			return Options{}, fmt.Errorf("%w: stream %q is not one of %q, %q, %q", ErrInvalidOptions, *o.Stream, v1.LogStreamAll, v1.LogStreamStdout, v1.LogStreamStderr)
		}
	}
	opts.Timestamps = o.Timestamps
	opts.Follow = o.Follow
	return opts, nil
}

func (o Options) validate() error {
	if o.TailLines < AllLines {
		return fmt.Errorf("%w: TailLines %d is below -1", ErrInvalidOptions, o.TailLines)
	}
	if o.LimitBytes < 0 {
		return fmt.Errorf("%w: LimitBytes %d is negative", ErrInvalidOptions, o.LimitBytes)
	}
	return nil
}
