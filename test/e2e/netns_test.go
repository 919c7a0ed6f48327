//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// nsListener makes a network namespace joined to this one by a veth pair
// (10.231.N.1 here, 10.231.N.2 in the namespace) and returns a TCP
// listener bound, inside the namespace, to its end of the pair, and that
// address. The kube-apiserver refuses to proxy (nodes/proxy) to a loopback
// address, and test traffic may only go to loopback or to a namespace the
// test made: an agent serving its API on this listener, with this address
// as its node IP, is reachable both ways. The namespace and the pair go
// when the test ends.
func nsListener(t *testing.T) (net.Listener, net.IP) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root")
	}
	n := os.Getpid() % 250
	ns := fmt.Sprintf("nk-srv-%d", os.Getpid())
	host, peer := fmt.Sprintf("nksh%d", n), fmt.Sprintf("nksp%d", n)
	hostIP, nsIP := fmt.Sprintf("10.231.%d.1", n), fmt.Sprintf("10.231.%d.2", n)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	_ = exec.Command("ip", "link", "del", host).Run() // left by a killed run
	_ = exec.Command("ip", "netns", "del", ns).Run()
	ip("netns", "add", ns)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = exec.Command("ip", "link", "del", host).Run()
	})
	ip("link", "add", host, "type", "veth", "peer", "name", peer)
	ip("link", "set", peer, "netns", ns)
	ip("addr", "add", hostIP+"/30", "dev", host)
	ip("link", "set", host, "up")
	ip("-n", ns, "addr", "add", nsIP+"/30", "dev", peer)
	ip("-n", ns, "link", "set", peer, "up")
	ip("-n", ns, "link", "set", "lo", "up")
	ln, err := listenInNetns(ns, net.JoinHostPort(nsIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln, net.ParseIP(nsIP)
}

// listenInNetns opens a TCP listener in the named network namespace: a
// thread of its own enters it, listens and comes back. A socket stays in
// the namespace it was made in, whatever thread later uses it. A thread
// that cannot come back is never unlocked, so it ends with its goroutine.
func listenInNetns(ns, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering netns %s: %w", ns, err)}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			if ln != nil {
				_ = ln.Close()
			}
			ch <- result{err: fmt.Errorf("leaving netns %s: %w", ns, err)}
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		ch <- result{ln, lerr}
	}()
	r := <-ch
	return r.ln, r.err
}
