package containerdevents

import (
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestServer is an in-process containerd event service on a unix socket:
// each Subscribe stream sends what Send queues and ends when End is called
// (with that error). Exported for the example (package
// containerdevents_test); it exists only in tests.
type TestServer struct {
	Endpoint string
	srv      *grpc.Server
	done     chan struct{}

	mu      sync.Mutex
	filters [][]string
	queue   chan []byte
	end     chan error
	opened  chan struct{} // one value per stream opened
}

// NewTestServer serves the Events service (or nothing, if events is false)
// on a socket in dir.
func NewTestServer(dir string, events bool) (*TestServer, error) {
	sock := filepath.Join(dir, "ev.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, err
	}
	s := &TestServer{
		Endpoint: "unix://" + sock,
		srv:      grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{})),
		done:     make(chan struct{}),
		queue:    make(chan []byte, 100),
		end:      make(chan error, 1),
		opened:   make(chan struct{}, 100),
	}
	if events {
		s.srv.RegisterService(&grpc.ServiceDesc{
			ServiceName: "containerd.services.events.v1.Events",
			HandlerType: (*any)(nil),
			Streams:     []grpc.StreamDesc{{StreamName: "Subscribe", ServerStreams: true, Handler: s.subscribe}},
		}, s)
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

func (s *TestServer) subscribe(_ any, stream grpc.ServerStream) error {
	var req rawMessage
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	var filters []string
	if err := walk(req, "SubscribeRequest", func(f field) error {
		if f.num == 1 {
			filters = append(filters, string(f.bytes))
		}
		return nil
	}); err != nil {
		return err
	}
	s.mu.Lock()
	s.filters = append(s.filters, filters)
	s.mu.Unlock()
	s.opened <- struct{}{}
	for {
		select {
		case <-stream.Context().Done():
			return stream.Context().Err()
		case err := <-s.end:
			return err
		case m := <-s.queue:
			msg := rawMessage(m)
			if err := stream.SendMsg(&msg); err != nil {
				return err
			}
		}
	}
}

// Send queues an envelope for the current (or next) stream.
func (s *TestServer) Send(m []byte) { s.queue <- m }

// End ends the current stream with err.
func (s *TestServer) End(err error) { s.end <- err }

// Opened returns a channel that receives once per stream opened.
func (s *TestServer) Opened() <-chan struct{} { return s.opened }

// Filters returns the filters each stream subscribed with.
func (s *TestServer) Filters() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.filters...)
}

// Stop stops the server and waits for it.
func (s *TestServer) Stop() {
	s.srv.Stop()
	<-s.done
}

// Envelope encodes an Envelope holding an Any of typeName with value.
func Envelope(ts time.Time, namespace, topic, typeName string, value []byte) []byte {
	var any []byte
	any = protowire.AppendTag(any, 1, protowire.BytesType)
	any = protowire.AppendString(any, typeName)
	any = protowire.AppendTag(any, 2, protowire.BytesType)
	any = protowire.AppendBytes(any, value)
	var b []byte
	if !ts.IsZero() {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, timestamp(ts))
	}
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, namespace)
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, topic)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	return protowire.AppendBytes(b, any)
}

func timestamp(t time.Time) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(t.Unix()))
	b = protowire.AppendTag(b, 2, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(t.Nanosecond()))
}

// TaskExit encodes containerd.events.TaskExit.
func TaskExit(containerID, id string, pid, status uint32, exitedAt time.Time) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, containerID)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendString(b, id)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(pid))
	b = protowire.AppendTag(b, 4, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(status))
	if !exitedAt.IsZero() {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, timestamp(exitedAt))
	}
	// A field of a later containerd (exit_reason = 6, an enum): skipped.
	b = protowire.AppendTag(b, 6, protowire.VarintType)
	return protowire.AppendVarint(b, 1)
}

// TaskOOM encodes containerd.events.TaskOOM.
func TaskOOM(containerID string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendString(b, containerID)
}

// newServer starts a TestServer stopped at the end of the test.
func newServer(t *testing.T, events bool) *TestServer {
	t.Helper()
	s, err := NewTestServer(t.TempDir(), events)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

var errTestEnd = errors.New("test: stream ended by the server")
