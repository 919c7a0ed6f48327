package remote_test

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime/remote"
)

// exampleRuntime is a tiny CRI runtime that knows one container.
type exampleRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (exampleRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "tiny", RuntimeVersion: "1.0", RuntimeApiVersion: "v1"}, nil
}

func (exampleRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "web"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}}, nil
}

func Example() {
	// Serve the tiny runtime on a unix socket, as containerd would.
	socket, stop, err := serve(func(s *grpc.Server) { runtimeapi.RegisterRuntimeServiceServer(s, exampleRuntime{}) })
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	cri, err := remote.New(remote.Config{Endpoint: "unix://" + socket})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = cri.Close(ctx) }()

	if err := cri.Connect(ctx); err != nil {
		fmt.Println(err)
		return
	}
	v, _ := cri.Version(ctx, "v1")
	fmt.Println(v.GetRuntimeName(), v.GetRuntimeVersion(), v.GetRuntimeApiVersion())

	containers, _ := cri.ListContainers(ctx, nil)
	for _, c := range containers {
		fmt.Println(c.GetId(), c.GetMetadata().GetName(), c.GetState())
	}

	// The tiny runtime lacks StartContainer.
	err = cri.StartContainer(ctx, "c1")
	fmt.Println(errors.Is(err, remote.ErrUnimplemented))
	fmt.Println(err)
	// Output:
	// tiny 1.0 v1
	// c1 web CONTAINER_RUNNING
	// true
	// remote: StartContainer "c1": unimplemented: method StartContainer not implemented
}

func ExampleNew_badEndpoint() {
	_, err := remote.New(remote.Config{Endpoint: "tcp://10.0.0.1:2376"})
	fmt.Println(errors.Is(err, remote.ErrInvalidEndpoint))
	fmt.Println(err)
	// Output:
	// true
	// remote: invalid endpoint: Endpoint "tcp://10.0.0.1:2376": scheme "tcp" is not supported (want unix:///path/to/socket or an absolute path)
}
