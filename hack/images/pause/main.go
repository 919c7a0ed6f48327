// Command pause is the sandbox ("infra") process of the locally built test
// pause image localhost/nodekit/pause:1. It holds the pod's namespaces open,
// reaps orphaned children when it is PID 1 of a shared PID namespace, and
// exits 0 on SIGTERM or SIGINT.
//
// It is built with CGO_ENABLED=0 by hack/containerd.sh and packed into an
// OCI image by hack/mkimage.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: got %v, exiting\n", sig)
		os.Exit(0)
	}
}

// reap collects every exited child without blocking.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
