package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
)

// exitTrace is where one exit's time went, from the host's trigger to the
// agent's report (-trace; zero times: not seen). Measurement only: it
// follows the same streams the agent or the kubelet could, from outside.
type exitTrace struct {
	// TriggeredAt: the container's stop FIFO was closed (its shell exits
	// right after; the host clock).
	TriggeredAt time.Time `json:"triggeredAt"`
	// TaskExitPublished, TaskExitReceived: containerd's native /tasks/exit
	// (the shim's publish time, and when this program read it).
	TaskExitPublished time.Time `json:"taskExitPublished,omitzero"`
	TaskExitReceived  time.Time `json:"taskExitReceived,omitzero"`
	// CRIMonitorAt: containerd's CRI exit monitor woke up with the exit
	// (its log line "received container exit event", -containerd-log).
	CRIMonitorAt time.Time `json:"criMonitorAt,omitzero"`
	// ShimDisconnectedAt: containerd closed its connection to the task's
	// shim after deleting the task and started "cleaning up after shim
	// disconnected" (an exec of the shim binary's delete command, which
	// runs "runc delete --force"; -containerd-log).
	ShimDisconnectedAt time.Time `json:"shimDisconnectedAt,omitzero"`
	// Runc calls made for this container after the trigger (-runc-log: a
	// runc wrapper's log; see RESULTS.md).
	Runc []runcCall `json:"runc,omitempty"`
	// TaskDeletePublished: containerd's /tasks/delete (published once the
	// shim deleted the task and containerd cleaned up after it; -ctr).
	TaskDeletePublished time.Time `json:"taskDeletePublished,omitzero"`
	// CRIEventCreated, CRIEventReceived: the CRI CONTAINER_STOPPED_EVENT
	// (its CreatedAt, and when this program's own GetContainerEvents
	// stream delivered it).
	CRIEventCreated  time.Time `json:"criEventCreated,omitzero"`
	CRIEventReceived time.Time `json:"criEventReceived,omitzero"`
}

// runcCall is one runc invocation as a wrapper logged it.
type runcCall struct {
	Cmd   string    `json:"cmd"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// exitTracer follows containerd's native task events and the CRI container
// events while the exits are measured.
type exitTracer struct {
	mu       sync.Mutex
	taskExit map[string][2]time.Time // published, received
	criStop  map[string][2]time.Time // created, received
	delete   map[string]time.Time    // /tasks/delete published
	wg       sync.WaitGroup
	cancel   context.CancelFunc
	errs     []error
}

// startExitTracer subscribes to both streams; stop ends them.
func startExitTracer(ctx context.Context, o options, c *cri) (*exitTracer, error) {
	t := &exitTracer{taskExit: map[string][2]time.Time{}, criStop: map[string][2]time.Time{}, delete: map[string]time.Time{}}
	ctx, t.cancel = context.WithCancel(ctx)
	w, err := containerdevents.New(containerdevents.Config{
		Endpoint: o.endpoint,
		Handler: func(_ context.Context, ev containerdevents.Event) {
			if ev.Type != containerdevents.Exit {
				return
			}
			now := time.Now()
			t.mu.Lock()
			if _, ok := t.taskExit[ev.ContainerID]; !ok {
				t.taskExit[ev.ContainerID] = [2]time.Time{ev.Published, now}
			}
			t.mu.Unlock()
		},
	})
	if err != nil {
		t.cancel()
		return nil, err
	}
	st, err := c.rt.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.cancel()
		return nil, fmt.Errorf("GetContainerEvents: %w", err)
	}
	if o.ctr != "" {
		if err := t.followCtr(ctx, o); err != nil {
			t.cancel()
			return nil, err
		}
	}
	t.wg.Go(func() {
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			t.fail(fmt.Errorf("containerd events: %w", err))
		}
	})
	t.wg.Go(func() {
		for {
			ev, err := st.Recv()
			if err != nil {
				if ctx.Err() == nil {
					t.fail(fmt.Errorf("CRI container events: %w", err))
				}
				return
			}
			now := time.Now()
			if ev.GetContainerEventType() != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
				continue
			}
			t.mu.Lock()
			if _, ok := t.criStop[ev.GetContainerId()]; !ok {
				t.criStop[ev.GetContainerId()] = [2]time.Time{time.Unix(0, ev.GetCreatedAt()), now}
			}
			t.mu.Unlock()
		}
	})
	return t, nil
}

var ctrEventLine = regexp.MustCompile(`^(\S+ \S+ \S+ \S+) \S+ (/tasks/\S+) .*"container_id":"([0-9a-f]{64})"`)

// followCtr runs "ctr events" (containerd's client, o.ctr) for the
// /tasks/delete events, which the agent's watcher does not decode.
func (t *exitTracer) followCtr(ctx context.Context, o options) error {
	cmd := exec.CommandContext(ctx, o.ctr, "-a", strings.TrimPrefix(o.endpoint, "unix://"), "events")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s events: %w", o.ctr, err)
	}
	t.wg.Go(func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m := ctrEventLine.FindStringSubmatch(sc.Text())
			if m == nil || m[2] != "/tasks/delete" {
				continue
			}
			ts, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", m[1])
			if err != nil {
				continue
			}
			t.mu.Lock()
			if _, ok := t.delete[m[3]]; !ok {
				t.delete[m[3]] = ts
			}
			t.mu.Unlock()
		}
		_ = cmd.Wait()
	})
	return nil
}

func (t *exitTracer) fail(err error) {
	t.mu.Lock()
	t.errs = append(t.errs, err)
	t.mu.Unlock()
}

// stop ends both streams and returns the first error either had.
func (t *exitTracer) stop() error {
	t.cancel()
	t.wg.Wait()
	if len(t.errs) > 0 {
		return t.errs[0]
	}
	return nil
}

// fill completes each sample's trace from the streams and the logs.
func (t *exitTracer) fill(o options, samples []exitSample) error {
	var monitor, disconnected map[string]time.Time
	if o.containerdLog != "" {
		var err error
		if monitor, disconnected, err = readContainerdLog(o.containerdLog); err != nil {
			return err
		}
	}
	var runc []runcLogLine
	if o.runcLog != "" {
		var err error
		if runc, err = readRuncLog(o.runcLog); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range samples {
		s := &samples[i]
		if s.Trace == nil {
			continue
		}
		id := s.ContainerID
		if v, ok := t.taskExit[id]; ok {
			s.Trace.TaskExitPublished, s.Trace.TaskExitReceived = v[0], v[1]
		}
		if v, ok := t.criStop[id]; ok {
			s.Trace.CRIEventCreated, s.Trace.CRIEventReceived = v[0], v[1]
		}
		s.Trace.CRIMonitorAt = monitor[id]
		s.Trace.ShimDisconnectedAt = disconnected[id]
		s.Trace.TaskDeletePublished = t.delete[id]
		for _, l := range runc {
			if l.id == id && !l.start.Before(s.Trace.TriggeredAt) {
				s.Trace.Runc = append(s.Trace.Runc, runcCall{Cmd: l.cmd, Start: l.start, End: l.end})
			}
		}
	}
	return nil
}

var (
	monitorLine      = regexp.MustCompile(`time="([^"]+)".*received container exit event.*?container_id:\\?"([0-9a-f]+)`)
	disconnectedLine = regexp.MustCompile(`time="([^"]+)".*msg="cleaning up after shim disconnected" id=([0-9a-f]+)`)
)

// readContainerdLog reads containerd's log for the CRI exit monitor's
// wake-ups and the clean-ups after a task's shim connection closed.
func readContainerdLog(path string) (monitor, disconnected map[string]time.Time, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	monitor, disconnected = map[string]time.Time{}, map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out, m := monitor, monitorLine.FindStringSubmatch(sc.Text())
		if m == nil {
			out, m = disconnected, disconnectedLine.FindStringSubmatch(sc.Text())
		}
		if m == nil {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil {
			continue
		}
		out[m[2]] = ts
	}
	return monitor, disconnected, sc.Err()
}

type runcLogLine struct {
	start, end time.Time
	cmd, id    string
}

// readRuncLog reads a runc wrapper's log: "<start ns> <end ns> <rc> <runc
// arguments>" per call.
func readRuncLog(path string) ([]runcLogLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []runcLogLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 4 {
			continue
		}
		s, err1 := strconv.ParseInt(fs[0], 10, 64)
		e, err2 := strconv.ParseInt(fs[1], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		l := runcLogLine{start: time.Unix(0, s), end: time.Unix(0, e)}
		args := fs[3:]
		// Global flags take a value ("--root X", "--log X", "--log-format
		// X"); the first bare word is the command, the last its id.
		for i := 0; i < len(args); i++ {
			a := args[i]
			if strings.HasPrefix(a, "--") {
				if !strings.Contains(a, "=") && (a == "--root" || a == "--log" || a == "--log-format") {
					i++
				}
				continue
			}
			l.cmd = a
			break
		}
		for i := len(args) - 1; i >= 0; i-- {
			if len(args[i]) == 64 && !strings.HasPrefix(args[i], "-") {
				l.id = args[i]
				break
			}
		}
		if l.cmd == "kill" && containsArg(args, "--all") {
			l.cmd = "kill --all"
		}
		if l.cmd == "delete" && containsArg(args, "--force") {
			l.cmd = "delete --force"
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

func containsArg(args []string, a string) bool {
	for _, x := range args {
		if x == a {
			return true
		}
	}
	return false
}

// traceRows summarises where the time of the traced exits went: one line
// per step, p50 / p90 / p99 / max over the samples that have both ends.
func traceRows(samples []exitSample) []string {
	type step struct {
		name string
		d    func(s exitSample) (time.Duration, bool)
	}
	between := func(a, b time.Time) (time.Duration, bool) {
		return b.Sub(a), !a.IsZero() && !b.IsZero()
	}
	runc := func(s exitSample, cmd string) (runcCall, bool) {
		for _, c := range s.Trace.Runc {
			if c.Cmd == cmd {
				return c, true
			}
		}
		return runcCall{}, false
	}
	steps := []step{
		{"FIFO closed -> process exited (finishedAt)", func(s exitSample) (time.Duration, bool) {
			return between(s.Trace.TriggeredAt, s.FinishedAt)
		}},
		{"finishedAt -> /tasks/exit published (shim)", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.Trace.TaskExitPublished)
		}},
		{"finishedAt -> /tasks/exit received (containerd API)", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.Trace.TaskExitReceived)
		}},
		{"finishedAt -> CRI exit monitor wakes", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.Trace.CRIMonitorAt)
		}},
		{"CRI exit monitor -> runc kill --all starts", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "kill --all")
			return c.Start.Sub(s.Trace.CRIMonitorAt), ok && !s.Trace.CRIMonitorAt.IsZero()
		}},
		{"runc kill --all (exec to exit)", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "kill --all")
			return c.End.Sub(c.Start), ok
		}},
		{"runc kill --all ends -> runc delete starts", func(s exitSample) (time.Duration, bool) {
			k, ok1 := runc(s, "kill --all")
			d, ok2 := runc(s, "delete")
			return d.Start.Sub(k.End), ok1 && ok2
		}},
		{"runc delete (exec to exit)", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete")
			return c.End.Sub(c.Start), ok
		}},
		{"runc delete ends -> /tasks/delete published (shim)", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete")
			return s.Trace.TaskDeletePublished.Sub(c.End), ok && !s.Trace.TaskDeletePublished.IsZero()
		}},
		{"/tasks/delete published -> shim connection closed, clean-up starts", func(s exitSample) (time.Duration, bool) {
			return between(s.Trace.TaskDeletePublished, s.Trace.ShimDisconnectedAt)
		}},
		{"clean-up starts -> runc delete --force starts (shim binary exec)", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete --force")
			return c.Start.Sub(s.Trace.ShimDisconnectedAt), ok && !s.Trace.ShimDisconnectedAt.IsZero()
		}},
		{"runc delete --force (exec to exit)", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete --force")
			return c.End.Sub(c.Start), ok
		}},
		{"runc delete --force ends -> CRI event created", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete --force")
			return s.Trace.CRIEventCreated.Sub(c.End), ok && !s.Trace.CRIEventCreated.IsZero()
		}},
		{"runc delete ends -> CRI event created", func(s exitSample) (time.Duration, bool) {
			c, ok := runc(s, "delete")
			return s.Trace.CRIEventCreated.Sub(c.End), ok && !s.Trace.CRIEventCreated.IsZero()
		}},
		{"CRI exit monitor -> CRI event created (containerd's exit handling)", func(s exitSample) (time.Duration, bool) {
			return between(s.Trace.CRIMonitorAt, s.Trace.CRIEventCreated)
		}},
		{"finishedAt -> CRI event created", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.Trace.CRIEventCreated)
		}},
		{"finishedAt -> CRI event received (the earliest any CRI client, the kubelet too, knows)", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.Trace.CRIEventReceived)
		}},
		{"CRI event created -> received (a second subscriber)", func(s exitSample) (time.Duration, bool) {
			return between(s.Trace.CRIEventCreated, s.Trace.CRIEventReceived)
		}},
		{"CRI event received -> agent's pod status (agent)", func(s exitSample) (time.Duration, bool) {
			return between(s.Trace.CRIEventReceived, s.ReportedAt)
		}},
		{"finishedAt -> agent's pod status (total)", func(s exitSample) (time.Duration, bool) {
			return between(s.FinishedAt, s.ReportedAt)
		}},
	}
	var out []string
	for _, st := range steps {
		var ds []time.Duration
		for _, s := range samples {
			if s.Trace == nil {
				continue
			}
			if d, ok := st.d(s); ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%-68s p50 %8s  p90 %8s  p99 %8s  max %8s  (%d)", st.name,
			ms(percentile(ds, 0.5)), ms(percentile(ds, 0.9)), ms(percentile(ds, 0.99)), ms(percentile(ds, 1)), len(ds)))
	}
	return out
}
