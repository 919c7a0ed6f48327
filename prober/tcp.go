package prober

import (
	"context"
	"net"
	"strconv"
	"time"
)

// TCPProber runs tcpSocket probes.
type TCPProber interface {
	ProbeTCP(ctx context.Context, host string, port int, timeout time.Duration) (Result, string, error)
}

type tcpProber struct{}

// NewTCPProber returns the default TCPProber: Success if a TCP connection
// to host:port opens within the timeout (it is closed at once), else
// Failure.
func NewTCPProber() TCPProber { return tcpProber{} }

func (tcpProber) ProbeTCP(ctx context.Context, host string, port int, timeout time.Duration) (Result, string, error) {
	d := net.Dialer{Timeout: timeout, KeepAlive: -1}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	_ = conn.Close()
	return Success, "", nil
}
