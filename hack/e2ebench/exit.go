package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// exitRun is what one relist period measured with o.exitPods pods.
type exitRun struct {
	Period   time.Duration `json:"period_ns"`
	Pods     int           `json:"pods"`
	IdleCPU  time.Duration `json:"idle_cpu_ns"`
	IdleWall time.Duration `json:"idle_window_ns"`
	// Latencies: the container's finishedAt to the agent's report.
	Latencies []time.Duration `json:"latencies_ns"`
	// AgentLatencies: the first time the runtime answered ContainerStatus
	// with the container exited (polled every 10ms from the exec's return)
	// to the agent's report: the agent's part of Latencies, give or take
	// the poll.
	AgentLatencies []time.Duration `json:"agent_latencies_ns"`
	Samples        []exitSample    `json:"samples"`
	Missing        int             `json:"missing"` // exits the agent never reported before the deadline
}

// exitSample is one container exit.
type exitSample struct {
	Pod         string     `json:"pod"`
	ContainerID string     `json:"containerID"`
	FinishedAt  time.Time  `json:"finishedAt"`       // the runtime's
	VisibleAt   time.Time  `json:"runtimeVisibleAt"` // first ContainerStatus saying exited
	ReportedAt  time.Time  `json:"agentReportedAt"`  // zero: never
	Trace       *exitTrace `json:"trace,omitempty"`  // -trace
}

func (r exitRun) idlePercent() float64 {
	if r.IdleWall <= 0 {
		return 0
	}
	return 100 * r.IdleCPU.Seconds() / r.IdleWall.Seconds()
}

// statusLine is the part of a standalone --status-log line read here.
type statusLine struct {
	Time       time.Time `json:"time"`
	Name       string    `json:"name"`
	Containers []struct {
		ContainerID      string `json:"containerID"`
		State            string `json:"state"`
		LastTerminatedID string `json:"lastTerminatedID"`
	} `json:"containers"`
}

// statusTail reads a growing status log from where it left off.
type statusTail struct {
	path string
	off  int64
	seen map[string]time.Time
}

// poll reads the complete lines added since the last poll and records the
// exits of ids among them in t.seen.
func (t *statusTail) poll(ids map[string]bool) error {
	f, err := os.Open(t.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	end := bytes.LastIndexByte(data, '\n')
	if end < 0 {
		return nil
	}
	t.off += int64(end + 1)
	return scanExits(data[:end+1], ids, t.seen)
}

// firstExitSeen returns, per container ID, the time of the first status-log
// line that shows the container not running any more (terminated, or the
// previous instance of a restarted container).
func firstExitSeen(data []byte, ids map[string]bool) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	return out, scanExits(data, ids, out)
}

func scanExits(data []byte, ids map[string]bool, out map[string]time.Time) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l statusLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("status log: %q: %w", sc.Text(), err)
		}
		for _, c := range l.Containers {
			var id string
			switch {
			case c.State == "terminated":
				id = trimScheme(c.ContainerID)
			case c.LastTerminatedID != "":
				id = trimScheme(c.LastTerminatedID)
			}
			if id == "" || !ids[id] {
				continue
			}
			if t, ok := out[id]; !ok || l.Time.Before(t) {
				out[id] = l.Time
			}
		}
	}
	return sc.Err()
}

func trimScheme(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

// mode names how the agent learnt of exits: "relist 1s" or the evented PLEG.
func (r exitRun) mode() string {
	if r.Period == 0 {
		return "evented PLEG"
	}
	return "relist " + r.Period.String()
}

// measureExits runs the exit-visibility case for one relist period (0: the
// evented PLEG).
func measureExits(ctx context.Context, o options, c *cri, bin, work string, period time.Duration, logf func(string, ...any)) (exitRun, error) {
	r := exitRun{Period: period, Pods: o.exitPods}
	pleg := []string{"--relist-period", period.String(), "--evented-pleg=false"}
	if period == 0 {
		// The evented PLEG on the runtime's container events, relisting at
		// pleg.DefaultEventedRelistPeriod (the kubelet's evented period).
		pleg = []string{"--evented-pleg"}
	}
	a, err := startAgent(ctx, o, bin, work, true, pleg...)
	if err != nil {
		return r, err
	}
	defer a.kill()
	publish, _, err := stageManifests(a.manifests, "exit", o.image, "Never", o.exitPods)
	if err != nil {
		return r, err
	}
	if err := publish(); err != nil {
		return r, err
	}
	if _, err := c.waitRunning(ctx, o.exitPods, o.poll, o.timeout); err != nil {
		return r, a.fail(err)
	}
	logf("  %s: %d pods running; settling %s, then %s idle", r.mode(), o.exitPods, o.settle, o.idleWindow)
	if err := pause(ctx, o.settle); err != nil {
		return r, err
	}

	// Idle: nothing changes; the agent relists and keeps its pods.
	cpu0, err := procCPU(a.pid())
	if err != nil {
		return r, err
	}
	w0 := time.Now()
	if err := pause(ctx, o.idleWindow); err != nil {
		return r, err
	}
	cpu1, err := procCPU(a.pid())
	if err != nil {
		return r, err
	}
	r.IdleWall, r.IdleCPU = time.Since(w0), cpu1-cpu0
	if err := a.alive(); err != nil {
		return r, err
	}

	// One exit at a time, each at a random phase of the relist period:
	// the latency of an exit, not of a storm of them (a storm of 110
	// teardowns within seconds swamps containerd 1.6 on 2 cores, and the
	// runtime's own lag then dominates). Each container's shell exits 0 on
	// its own once its stop FIFO is closed.
	cs, err := c.runningContainers(ctx)
	if err != nil {
		return r, err
	}
	if len(cs) != o.exitPods {
		return r, fmt.Errorf("%d containers running before the exits, want %d", len(cs), o.exitPods)
	}
	logf("  %s: idle CPU %.2f%% of a core; %d exits, one at a time", r.mode(), r.idlePercent(), len(cs))
	rand.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
	tl := &statusTail{path: a.statusLog, seen: map[string]time.Time{}}
	var tr *exitTracer
	if o.trace {
		if tr, err = startExitTracer(ctx, o, c); err != nil {
			return r, err
		}
		defer tr.stop()
	}
	for _, ct := range cs {
		if err := pause(ctx, time.Duration(rand.Int64N(int64(cmp.Or(period, time.Second))))); err != nil {
			return r, err
		}
		triggered, finished, visible, err := exitContainer(ctx, c, ct.Id)
		if err != nil {
			return r, a.fail(err)
		}
		x := exitSample{Pod: ct.Labels[labelPodName], ContainerID: ct.Id, FinishedAt: finished, VisibleAt: visible}
		if tr != nil {
			x.Trace = &exitTrace{TriggeredAt: triggered}
		}
		deadline := time.Now().Add(10*time.Second + 5*period)
		for {
			if err := tl.poll(map[string]bool{ct.Id: true}); err != nil {
				return r, err
			}
			if t, ok := tl.seen[ct.Id]; ok {
				x.ReportedAt = t
				break
			}
			if time.Now().After(deadline) {
				break
			}
			if err := pause(ctx, 5*time.Millisecond); err != nil {
				return r, err
			}
		}
		r.Samples = append(r.Samples, x)
		if x.ReportedAt.IsZero() {
			r.Missing++
		} else {
			r.Latencies = append(r.Latencies, x.ReportedAt.Sub(x.FinishedAt))
			r.AgentLatencies = append(r.AgentLatencies, x.ReportedAt.Sub(x.VisibleAt))
		}
		if err := pause(ctx, o.exitGap); err != nil {
			return r, err
		}
	}
	if tr != nil {
		if err := tr.stop(); err != nil {
			return r, err
		}
		if err := tr.fill(o, r.Samples); err != nil {
			return r, err
		}
		for _, l := range traceRows(r.Samples) {
			logf("  %s: %s", r.mode(), l)
		}
	}
	if err := a.removeManifests(); err != nil {
		return r, err
	}
	if _, err := c.waitStopped(ctx, 50*time.Millisecond, o.timeout); err != nil {
		return r, a.fail(err)
	}
	return r, a.stop()
}

// exitContainer makes the container's shell exit by opening and closing
// its stop FIFO (through /proc/<pid>/root: root on the runtime's host) and
// returns when the FIFO was closed, when the container finished, as the
// runtime reports it, and when the runtime first answered that it had.
func exitContainer(ctx context.Context, c *cri, id string) (triggered, finished, visible time.Time, err error) {
	ectx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	pid, err := c.containerPID(ectx, id)
	if err != nil {
		return triggered, finished, visible, err
	}
	if err := closeFIFO(ectx, fmt.Sprintf("/proc/%d/root%s", pid, stopFIFO)); err != nil {
		return triggered, finished, visible, fmt.Errorf("container %s: %w", id, err)
	}
	triggered = time.Now()
	for {
		st, err := c.rt.ContainerStatus(ectx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return triggered, finished, visible, fmt.Errorf("ContainerStatus %s: %w", id, err)
		}
		if s := st.GetStatus(); s.GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			return triggered, time.Unix(0, s.FinishedAt), time.Now(), nil
		}
		if err := pause(ectx, 10*time.Millisecond); err != nil {
			return triggered, finished, visible, fmt.Errorf("container %s did not exit: %w", id, err)
		}
	}
}

// closeFIFO opens a FIFO for writing and closes it: its reader gets EOF.
// The open blocks until the reader has the FIFO open; if the FIFO is not
// there yet (the container just started), it retries.
func closeFIFO(ctx context.Context, path string) error {
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			return f.Close()
		}
		// ENOENT: not made yet; ENXIO: no reader yet.
		if !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENXIO) {
			return err
		}
		if err := pause(ctx, 10*time.Millisecond); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// workDir makes a fresh subdirectory.
func workDir(root, name string) (string, error) {
	d := filepath.Join(root, name)
	return d, os.MkdirAll(d, 0o755)
}
