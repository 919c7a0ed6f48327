package runtimetest

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// Endpoint is one CRI implementation under test, made fresh for each test.
type Endpoint struct {
	// Runtime and Images are the CRI endpoint (often the same object).
	Runtime kuberuntime.RuntimeService
	Images  kuberuntime.ImageService
	// Clock is the clock the runtime runs on; the suite gives it to the
	// kuberuntime.Manager it builds and measures every duration with it.
	Clock clock.Clock
	// Step lets d of clock time pass: a fake clock is stepped, the real clock
	// is waited on.
	Step func(d time.Duration)
	// Settle, if set, returns once goroutines the suite started have had a
	// chance to block on Clock (a fake clock's HasWaiters), so that Step does
	// not run ahead of them. Nil for the real clock.
	Settle func()
	// Received, if set, counts the calls the runtime received
	// (fake.Runtime.CallsReceived). With it, a timed call the suite drives
	// is given up to 5s of real time to reach the runtime before the clock
	// moves: over a transport (the fake behind runtime/remote, under
	// -race and load) a step could otherwise run before the runtime read
	// the time the call's timeout counts from.
	Received func() int
	// Tick is the clock time a polling loop lets pass between looks
	// (default 500ms).
	Tick time.Duration
	// Slack is how much later than the ideal a timed event may happen:
	// 0 for a fake clock, a few seconds for a real runtime.
	Slack time.Duration

	// PauseImage and BusyboxImage are present in the runtime; MissingImage
	// is not, and can't be pulled.
	PauseImage   string
	BusyboxImage string
	MissingImage string
	// LogRoot is a writable directory for container logs.
	LogRoot string
	// Namespace is the pod namespace the suite uses (default "nodekit-test").
	Namespace string
}

func (e *Endpoint) tick() time.Duration {
	if e.Tick > 0 {
		return e.Tick
	}
	return 500 * time.Millisecond
}

func (e *Endpoint) namespace() string {
	if e.Namespace != "" {
		return e.Namespace
	}
	return "nodekit-test"
}

// Factory makes a fresh Endpoint for one test; cleanup goes to t.Cleanup.
type Factory func(t *testing.T) *Endpoint

// drive runs op while letting clock time pass in ticks, and returns how much
// clock time op took. limit bounds the clock time; past it the test fails.
func (e *Endpoint) drive(t *testing.T, limit time.Duration, op func()) time.Duration {
	t.Helper()
	done := make(chan struct{})
	start := e.Clock.Now()
	before := 0
	if e.Received != nil {
		before = e.Received()
	}
	go func() {
		defer close(done)
		op()
	}()
	if e.Received != nil {
		armed := time.NewTimer(5 * time.Second) //nodekit:allow clock the real-time bound of a wait for a call to reach a fake runtime
		defer armed.Stop()
	wait:
		for e.Received() <= before {
			select {
			case <-done:
				break wait
			case <-armed.C:
				break wait
			default:
				runtime.Gosched()
			}
		}
	}
	for {
		if e.Settle != nil {
			e.Settle()
		}
		select {
		case <-done:
			return e.Clock.Since(start)
		default:
		}
		if e.Clock.Since(start) > limit {
			// Let op finish (it is bounded by its own ctx) before failing.
			<-done
			t.Fatalf("operation took more than %v of clock time", limit)
		}
		e.Step(e.tick() / 5)
	}
}

// eventually lets clock time pass until cond holds, for at most limit.
func (e *Endpoint) eventually(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	start := e.Clock.Now()
	last := ""
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if e.Clock.Since(start) > limit {
			t.Fatalf("%s: not true after %v; last state: %s", what, limit, last)
		}
		e.Step(e.tick())
	}
}

// newPod makes a host-network pod with a unique UID.
func (e *Endpoint) newPod(t *testing.T, restart v1.RestartPolicy, grace int64, containers ...v1.Container) *v1.Pod {
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	name = strings.Trim(name, "-")
	uid := fmt.Sprintf("%s-%x", name, e.Clock.Now().UnixNano())
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.namespace(), UID: types.UID(uid)},
		Spec: v1.PodSpec{
			Containers:                    containers,
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: ptr.To(grace),
			HostNetwork:                   true,
			DNSPolicy:                     v1.DNSDefault,
		},
	}
}

// busybox is a container running cmd in the busybox image.
func (e *Endpoint) busybox(name string, cmd ...string) v1.Container {
	return v1.Container{
		Name:                     name,
		Image:                    e.BusyboxImage,
		Command:                  cmd,
		ImagePullPolicy:          v1.PullIfNotPresent,
		TerminationMessagePolicy: v1.TerminationMessageReadFile,
	}
}

func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	if status.Code(err) == codes.NotFound {
		return true
	}
	var se interface{ GRPCStatus() *status.Status }
	return errors.As(err, &se) && se.GRPCStatus().Code() == codes.NotFound
}

func describe(st *kubetypes.PodStatus) string {
	if st == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "sandboxes=%d", len(st.SandboxStatuses))
	for _, cs := range st.ContainerStatuses {
		fmt.Fprintf(&b, " %s[%s exit=%d restarts=%d]", cs.Name, cs.State, cs.ExitCode, cs.RestartCount)
	}
	return b.String()
}
