package fakestream_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/fake/fakestream"
)

// A Server serves the URLs the fake's Exec, Attach and PortForward
// hand out; client-go's executors (as kubectl, or a node server proxying
// them) talk to it as to containerd's.
func Example() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt, _ := fake.New(fake.Config{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv, _ := fakestream.New(fakestream.Config{Runtime: rt, Listener: lis})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	sbCfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"}}
	sb, _ := rt.RunPodSandbox(ctx, sbCfg, "")
	id, _ := rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
		Command: []string{"sleep", "infinity"}}, sbCfg)
	_ = rt.StartContainer(ctx, id)

	resp, err := rt.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh", "-c", "cat; exit 3"}, Stdin: true, Stdout: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	u, _ := url.Parse(resp.GetUrl())
	ex, _ := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	var out strings.Builder
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &out})
	fmt.Printf("stdout %q, %v\n", out.String(), err)
	// Output:
	// stdout "hello\n", command terminated with exit code 3
}
