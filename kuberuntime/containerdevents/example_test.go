package containerdevents_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
)

func Example() {
	// An in-process stand-in for containerd's event service (tests only).
	dir, _ := os.MkdirTemp("", "cdev")
	defer os.RemoveAll(dir)
	srv, err := containerdevents.NewTestServer(dir, true)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()
	finished := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	srv.Send(containerdevents.Envelope(finished, "k8s.io", containerdevents.TopicExit, "containerd.events.TaskExit",
		containerdevents.TaskExit("4f1c", "4f1c", 4242, 3, finished)))

	ctx, cancel := context.WithCancel(context.Background())
	w, err := containerdevents.New(containerdevents.Config{
		Endpoint: srv.Endpoint,
		Handler: func(_ context.Context, ev containerdevents.Event) {
			switch ev.Type {
			case containerdevents.Subscribed:
				fmt.Println("subscribed, attempt", ev.Attempt)
			case containerdevents.Exit:
				fmt.Printf("container %s exited with %d at %s\n", ev.ContainerID, ev.ExitCode, ev.FinishedAt.UTC().Format(time.RFC3339))
				cancel()
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("Run:", w.Run(ctx))
	// Output:
	// subscribed, attempt 1
	// container 4f1c exited with 3 at 2026-01-02T03:04:05Z
	// Run: <nil>
}
