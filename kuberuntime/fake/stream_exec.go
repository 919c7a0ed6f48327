package fake

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// attachment is one attach session's view of a container's output.
type attachment struct {
	mu             sync.Mutex
	stdout, stderr io.Writer
}

func (a *attachment) write(stream string, p []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.stdout
	if stream == "stderr" {
		w = a.stderr
	}
	_, _ = w.Write(p)
}

// ExecStream runs cmd in a running container for a Streamer's exec
// session and returns its exit code: through the exec handler when one is
// set (stdin unused), else through the interpreter (see the package
// documentation).
func (r *Runtime) ExecStream(ctx context.Context, id string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int32, error) {
	if _, err := r.runningContainer(id); err != nil {
		return 0, err
	}
	r.mu.Lock()
	h := r.execHandler
	r.mu.Unlock()
	if h != nil {
		out, errOut, code, err := h(id, slices.Clone(cmd))
		_, _ = stdout.Write(out)
		_, _ = stderr.Write(errOut)
		return code, err
	}
	return execInterpret(ctx, cmd, stdin, stdout, stderr), nil
}

// AttachStream serves a Streamer's attach session: it streams the
// container's output (AppendLog) to stdout and stderr until the container
// stops, done is closed (the client went away) or ctx ends. Stdin, if not
// nil, is read and, when the container's command is a bare `cat`, echoed
// as its stdout (and logged); otherwise it is dropped. The returned wait
// joins the stdin reader, which returns once stdin does (close the
// session's connection first).
func (r *Runtime) AttachStream(ctx context.Context, id string, stdin io.Reader, stdout, stderr io.Writer, done <-chan struct{}) (wait func(), err error) {
	a := &attachment{stdout: stdout, stderr: stderr}
	sub := r.subscribe()
	defer r.unsubscribe(sub)
	r.mu.Lock()
	c := r.lookupContainerLocked(id)
	if c == nil {
		r.mu.Unlock()
		return func() {}, notFound("container", id)
	}
	r.advanceLocked(c, r.nowNano())
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.mu.Unlock()
		return func() {}, nil
	}
	cmd := append(slices.Clone(c.config.GetCommand()), c.config.GetArgs()...)
	echo := len(cmd) == 1 && filepath.Base(cmd[0]) == "cat"
	r.attached[c.id] = append(r.attached[c.id], a)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		list := slices.DeleteFunc(r.attached[id], func(x *attachment) bool { return x == a })
		if len(list) == 0 {
			delete(r.attached, id)
		} else {
			r.attached[id] = list
		}
		r.mu.Unlock()
	}()

	var wg sync.WaitGroup
	if stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := stdin.Read(buf)
				if n > 0 && echo {
					_ = r.AppendLog(id, "stdout", string(buf[:n]))
				}
				if err != nil {
					return
				}
			}
		}()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // done ends the wait below; cancel ends this goroutine
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		evs, err := r.next(ctx, sub)
		if err != nil {
			return wg.Wait, nil // the client went away or the server stops
		}
		for _, ev := range evs {
			if ev.GetContainerId() == id && (ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT ||
				ev.GetContainerEventType() == runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT) {
				return wg.Wait, nil
			}
		}
	}
}

// execInterpret runs the commands an exec session understands without an exec
// handler: echo [-n], cat (stdin to stdout), true, false, exit N, and
// sh -c with statements separated by ; newlines and && (redirection >&2
// sends a statement's output to stderr). Anything else exits 0 silently.
func execInterpret(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int32 {
	if len(args) == 0 {
		return 0
	}
	switch filepath.Base(args[0]) {
	case "sh", "bash", "ash":
		if len(args) >= 3 && args[1] == "-c" {
			code, _ := script(ctx, args[2], stdin, stdout, stderr)
			return code
		}
		b, _ := io.ReadAll(stdin)
		code, _ := script(ctx, string(b), strings.NewReader(""), stdout, stderr)
		return code
	}
	code, _ := simple(ctx, args, stdin, stdout, stderr)
	return code
}

// simple runs one command; exit reports whether it was `exit`.
func simple(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (code int32, exit bool) {
	var words []string
	for _, a := range args {
		if a == ">&2" || a == "1>&2" {
			stdout = stderr
			continue
		}
		words = append(words, a)
	}
	if len(words) == 0 {
		return 0, false
	}
	switch filepath.Base(words[0]) {
	case "echo":
		a, nl := words[1:], "\n"
		if len(a) > 0 && a[0] == "-n" {
			a, nl = a[1:], ""
		}
		_, _ = io.WriteString(stdout, strings.Join(a, " ")+nl)
	case "cat":
		if len(words) > 1 && words[1] != "-" {
			_, _ = fmt.Fprintf(stderr, "cat: can't open '%s': No such file or directory\n", words[1])
			return 1, false
		}
		_, _ = io.Copy(stdout, readerCtx{ctx, stdin})
	case "false":
		return 1, false
	case "exit":
		if len(words) > 1 {
			n, err := strconv.Atoi(words[1])
			if err != nil || n < 0 || n > 255 {
				return 2, true
			}
			return int32(n), true
		}
		return 0, true
	case "sh", "bash", "ash":
		return execInterpret(ctx, words, stdin, stdout, stderr), false
	}
	return 0, false
}

// script runs a small shell script (see execInterpret).
func script(ctx context.Context, text string, stdin io.Reader, stdout, stderr io.Writer) (int32, bool) {
	var code int32
	for _, stmt := range splitStatements(text) {
		for i, part := range strings.Split(stmt, "&&") {
			if i > 0 && code != 0 {
				break
			}
			var exit bool
			code, exit = simple(ctx, shellWords(part), stdin, stdout, stderr)
			if exit {
				return code, true
			}
		}
	}
	return code, false
}

// splitStatements splits at ; and newlines outside quotes.
func splitStatements(s string) []string {
	var out []string
	var quote rune
	start := 0
	for i, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == ';' || c == '\n':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// shellWords splits at blanks outside quotes and removes the quotes.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// readerCtx stops a copy between reads once ctx ends.
type readerCtx struct {
	ctx context.Context
	r   io.Reader
}

func (r readerCtx) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
