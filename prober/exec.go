package prober

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxOutput caps the output an exec probe keeps and the response body an
// HTTP probe reads (10 KiB, as the kubelet).
const MaxOutput = 10 << 10

// ExecRunner runs a command in a container and waits for it (the CRI's
// ExecSync; runtime/remote's *Client and runtime/fake's *Runtime satisfy
// it). A non-zero exit must come back as an error with an ExitStatus() int
// method; a timeout as an error matching context.DeadlineExceeded.
type ExecRunner interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// ExecProber runs exec probes.
type ExecProber interface {
	ProbeExec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, string, error)
}

// exitStatuser is the error of a command that ran and exited.
type exitStatuser interface{ ExitStatus() int }

// execProber is the ExecProber over an ExecRunner.
type execProber struct{ run ExecRunner }

// NewExecProber returns the ExecProber that runs cmd through r: exit 0 is
// Success, another exit code or a timeout is Failure, any other error is
// Unknown with the error (retried by the worker). The output (stdout then
// stderr) is capped at MaxOutput.
func NewExecProber(r ExecRunner) ExecProber { return execProber{run: r} }

func (p execProber) ProbeExec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (Result, string, error) {
	if p.run == nil {
		return Unknown, "", ErrNoExec
	}
	stdout, stderr, err := p.run.ExecSync(ctx, rawID(containerID), cmd, timeout)
	out := capOutput(stdout, stderr)
	if err != nil {
		var exit exitStatuser
		if errors.As(err, &exit) {
			if exit.ExitStatus() == 0 {
				return Success, out, nil
			}
			return Failure, out, nil
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return Failure, fmt.Sprintf("command %q timed out after %v", cmd, timeout), nil
		}
		return Unknown, "", err
	}
	return Success, out, nil
}

// capOutput joins stdout and stderr, keeping at most MaxOutput bytes.
func capOutput(stdout, stderr []byte) string {
	n := min(len(stdout), MaxOutput)
	m := min(len(stderr), MaxOutput-n)
	if n+m == 0 {
		return ""
	}
	b := make([]byte, 0, n+m)
	b = append(b, stdout[:n]...)
	b = append(b, stderr[:m]...)
	return string(b)
}
