package server

import (
	"net"
	"testing"
)

// TestPerPodStateForgotten (issue 29): the server keeps a stream
// connection (exec, attach, port-forward of a pod) only while it is open:
// closing it, by either side's end of the session, forgets it.
func TestPerPodStateForgotten(t *testing.T) {
	var s Server
	var conns []net.Conn
	for range 20 {
		a, b := net.Pipe()
		defer b.Close()
		conns = append(conns, s.track(a))
	}
	if len(s.conns.conns) != 20 {
		t.Fatalf("%d connections tracked, want 20", len(s.conns.conns))
	}
	for _, c := range conns {
		_ = c.Close()
		_ = c.Close() // twice is fine
	}
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	if n := len(s.conns.conns); n != 0 {
		t.Errorf("%d closed connections still tracked", n)
	}
}
