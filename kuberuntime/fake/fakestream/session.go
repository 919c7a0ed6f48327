package fakestream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/nodekit/nodekit/kuberuntime/fake"
)

// The port-forward subprotocol over SPDY.
const portForwardProtocol = "portforward.k8s.io"

// spdyProtocols are the remote command subprotocols served over SPDY, best
// first (v1 has known bugs and is not offered).
var spdyProtocols = []string{
	remotecommand.StreamProtocolV4Name,
	remotecommand.StreamProtocolV3Name,
	remotecommand.StreamProtocolV2Name,
}

// sessionIO is one remote command session's streams, whatever carries them.
type sessionIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	errStream      io.WriteCloser
	protocol       string
	// done is closed when the client goes away.
	done <-chan struct{}
}

type streamAndReply struct {
	httpstream.Stream
	replySent <-chan struct{}
}

// serveRemoteCommand serves an exec or attach session over SPDY or WebSocket.
func (s *Server) serveRemoteCommand(w http.ResponseWriter, req *http.Request, sr *session) {
	ctx := req.Context()
	if wsstream.IsWebSocketRequest(req) {
		s.serveWebSocket(ctx, w, req, sr)
		return
	}
	protocol, err := httpstream.Handshake(req, w, spdyProtocols)
	if err != nil {
		return // Handshake answered the client
	}
	streams := make(chan streamAndReply)
	sessionDone := make(chan struct{})
	defer close(sessionDone)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- streamAndReply{st, replySent}:
			return nil
		case <-sessionDone:
			return errors.New("session is over")
		}
	})
	if conn == nil {
		return // UpgradeResponse answered the client
	}
	defer conn.Close()

	expected := 1 // the error stream
	for _, b := range []bool{sr.Stdin, sr.Stdout, sr.Stderr, sr.TTY && protocol != remotecommand.StreamProtocolV2Name} {
		if b {
			expected++
		}
	}
	expired := time.NewTimer(s.timeout)
	defer expired.Stop()
	var (
		got     []streamAndReply
		sio     = sessionIO{protocol: protocol}
		resize  io.Reader
		closeCh = make(chan struct{})
	)
	for len(got) < expected {
		select {
		case st := <-streams:
			got = append(got, st)
			switch st.Headers().Get(v1.StreamType) {
			case v1.StreamTypeError:
				sio.errStream = st
			case v1.StreamTypeStdin:
				sio.stdin = st
			case v1.StreamTypeStdout:
				sio.stdout = st
			case v1.StreamTypeStderr:
				sio.stderr = st
			case v1.StreamTypeResize:
				resize = st
			default:
				s.log.Info("unexpected stream type", zap.String("type", st.Headers().Get(v1.StreamType)))
			}
		case <-expired.C:
			s.log.Info("client did not open its streams in time", zap.String("session", sr.Kind))
			return
		case <-ctx.Done():
			return
		}
	}
	for _, st := range got {
		select {
		case <-st.replySent:
		case <-ctx.Done():
			return
		}
	}
	if sio.errStream == nil {
		s.log.Info("client opened no error stream", zap.String("session", sr.Kind))
		return
	}
	go func() {
		select {
		case <-conn.CloseChan():
		case <-ctx.Done():
		}
		close(closeCh)
	}()
	sio.done = closeCh
	var wg sync.WaitGroup
	if resize != nil {
		wg.Add(1)
		go func() { // terminal sizes are accepted and ignored
			defer wg.Done()
			_, _ = io.Copy(io.Discard, resize)
		}()
	}
	wait := s.run(ctx, sr, &sio)
	_ = conn.Close()
	<-closeCh
	wait()
	wg.Wait()
}

// serveWebSocket serves an exec or attach session over WebSocket
// (channels 0-4: stdin, stdout, stderr, error, resize).
func (s *Server) serveWebSocket(ctx context.Context, w http.ResponseWriter, req *http.Request, sr *session) {
	in := wsstream.IgnoreChannel
	if sr.Stdin {
		in = wsstream.ReadChannel
	}
	out := func(b bool) wsstream.ChannelType {
		if b {
			return wsstream.WriteChannel
		}
		return wsstream.IgnoreChannel
	}
	resize := wsstream.IgnoreChannel
	if sr.TTY {
		resize = wsstream.ReadChannel
	}
	channels := []wsstream.ChannelType{in, out(sr.Stdout), out(sr.Stderr), wsstream.WriteChannel, resize}
	protocols := wsstream.NewDefaultChannelProtocols(channels)
	for _, p := range []string{remotecommand.StreamProtocolV5Name, remotecommand.StreamProtocolV4Name, remotecommand.StreamProtocolV3Name, remotecommand.StreamProtocolV2Name} {
		protocols[p] = wsstream.ChannelProtocolConfig{Binary: true, Channels: channels}
	}
	conn := wsstream.NewConn(protocols)
	protocol, rw, err := conn.Open(w, req)
	if err != nil {
		s.log.Info("websocket upgrade failed", zap.Error(err))
		return
	}
	defer conn.Close()
	sio := sessionIO{protocol: protocol, errStream: rw[3]}
	if sr.Stdin {
		sio.stdin = rw[0]
	}
	if sr.Stdout {
		sio.stdout = rw[1]
	}
	if sr.Stderr {
		sio.stderr = rw[2]
	}
	closeCh := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	// wsstream offers no close notification: a session ends when the
	// client closes (reads fail) or ctx ends.
	sio.done = closeCh
	var wg sync.WaitGroup
	if sr.TTY {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(io.Discard, rw[4])
		}()
	}
	wait := s.run(ctx, sr, &sio)
	_ = conn.Close()
	close(closeCh)
	wait()
	wg.Wait()
}

// run runs the session's command (exec) or attachment (attach), then
// reports its end on the error stream as the protocol wants. The returned
// wait joins what still reads the client's stdin; call it once the
// connection is closed.
func (s *Server) run(ctx context.Context, sr *session, sio *sessionIO) (wait func()) {
	wait = func() {}
	stdout, stderr := sio.stdout, sio.stderr
	if stdout == nil {
		stdout = nopWriteCloser{io.Discard}
	}
	if stderr == nil {
		stderr = stdout // a tty has no stderr
		if sio.stdout == nil {
			stderr = nopWriteCloser{io.Discard}
		}
	}
	stdin := sio.stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var code int32
	var err error
	switch sr.Kind {
	case fake.StreamExec:
		code, err = s.rt.ExecStream(ctx, sr.ID, sr.Cmd, stdin, stdout, stderr)
	case fake.StreamAttach:
		wait, err = s.rt.AttachStream(ctx, sr.ID, sio.stdin, stdout, stderr, sio.done)
	}
	if sio.stdout != nil {
		_ = sio.stdout.Close()
	}
	if sio.stderr != nil {
		_ = sio.stderr.Close()
	}
	writeStatus(sio.errStream, sio.protocol, sr.Cmd, code, err)
	_ = sio.errStream.Close()
	return wait
}

// writeStatus reports a session's end: v4 and v5 send a Status as JSON
// (Success, or NonZeroExitCode with the exit code as a cause); older
// protocols send only a failure's text.
func writeStatus(w io.Writer, protocol string, cmd []string, code int32, err error) {
	structured := protocol == remotecommand.StreamProtocolV4Name || protocol == remotecommand.StreamProtocolV5Name
	var st metav1.Status
	switch {
	case err != nil:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError,
			Code: http.StatusInternalServerError, Message: fmt.Sprintf("Internal error occurred: %v", err)}
	case code != 0:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: error executing command %v, exit code %d", cmd, code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(int(code))}}}}
	default:
		if !structured {
			return
		}
		st = metav1.Status{Status: metav1.StatusSuccess}
	}
	if !structured {
		_, _ = io.WriteString(w, st.Message)
		return
	}
	b, _ := json.Marshal(st)
	_, _ = w.Write(b)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// servePortForward serves a port-forward session over SPDY: the client opens
// a pair of streams (error and data, with the same requestID and a port
// header) per forwarded connection; each pair goes to the PortForwarder.
func (s *Server) servePortForward(w http.ResponseWriter, req *http.Request, sr *session) {
	ctx := req.Context()
	if _, err := httpstream.Handshake(req, w, []string{portForwardProtocol}); err != nil {
		return
	}
	streams := make(chan streamAndReply)
	sessionDone := make(chan struct{})
	defer close(sessionDone)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(st httpstream.Stream, replySent <-chan struct{}) error {
		select {
		case streams <- streamAndReply{st, replySent}:
			return nil
		case <-sessionDone:
			return errors.New("session is over")
		}
	})
	if conn == nil {
		return
	}
	type pair struct{ data, err *streamAndReply }
	pairs := map[string]*pair{}
	var wg sync.WaitGroup
	fwdCtx, cancel := context.WithCancel(ctx)
	defer func() { // end the forwards (closing the connection unblocks them), then wait
		cancel()
		_ = conn.Close()
		wg.Wait()
	}()
	for {
		select {
		case <-conn.CloseChan():
			return
		case <-ctx.Done():
			return
		case st := <-streams:
			id := st.Headers().Get(v1.PortForwardRequestIDHeader)
			p := pairs[id]
			if p == nil {
				p = &pair{}
				pairs[id] = p
			}
			switch st.Headers().Get(v1.StreamType) {
			case v1.StreamTypeError:
				p.err = &st
			case v1.StreamTypeData:
				p.data = &st
			default:
				s.log.Info("unexpected port-forward stream type", zap.String("type", st.Headers().Get(v1.StreamType)))
				_ = st.Reset()
				continue
			}
			if p.data == nil || p.err == nil {
				continue
			}
			delete(pairs, id)
			wg.Add(1)
			go func(data, errSt streamAndReply) {
				defer wg.Done()
				defer conn.RemoveStreams(data, errSt)
				for _, st := range []streamAndReply{data, errSt} {
					select {
					case <-st.replySent:
					case <-fwdCtx.Done():
						return
					}
				}
				port, perr := strconv.ParseInt(data.Headers().Get(v1.PortHeader), 10, 32)
				if perr == nil && (port <= 0 || port > 65535) {
					perr = fmt.Errorf("port %d out of range", port)
				}
				if perr == nil {
					perr = s.forward(fwdCtx, sr.ID, int32(port), data)
				}
				if perr != nil && !errors.Is(perr, io.EOF) {
					_, _ = fmt.Fprintf(errSt, "error forwarding port %s to pod %s: %v", data.Headers().Get(v1.PortHeader), sr.ID, perr)
				}
				_ = errSt.Close()
				_ = data.Close()
			}(*p.data, *p.err)
		}
	}
}
