package prober

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// GRPCProber runs grpc probes.
type GRPCProber interface {
	ProbeGRPC(ctx context.Context, host string, port int, service string, timeout time.Duration) (Result, string, error)
}

type grpcProber struct{}

// NewGRPCProber returns the default GRPCProber: a grpc.health.v1 Check of
// service over plain text; SERVING is Success, any other answer, an error
// or no answer within the timeout is Failure.
func NewGRPCProber() GRPCProber { return grpcProber{} }

func (grpcProber) ProbeGRPC(ctx context.Context, host string, port int, service string, timeout time.Duration) (Result, string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(UserAgent))
	if err != nil {
		return Failure, fmt.Sprintf("error: cannot connect to %q: %v", addr, err), nil
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, "error: this server does not implement the grpc health protocol (grpc.health.v1.Health)", nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return Success, "service healthy", nil
}
