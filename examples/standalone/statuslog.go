package main

import (
	"context"
	"encoding/json"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/podstatus"
)

// StatusLogLine is one line of the --status-log file: a pod status as the
// agent's status manager delivered it, and when. A program watching the file
// sees each status change as it is reported, without polling the agent.
type StatusLogLine struct {
	// Time is when the status reached the sink (RFC 3339, nanoseconds).
	Time       time.Time            `json:"time"`
	Namespace  string               `json:"namespace"`
	Name       string               `json:"name"`
	UID        string               `json:"uid"`
	Phase      v1.PodPhase          `json:"phase"`
	Deleted    bool                 `json:"deleted,omitempty"`
	Containers []StatusLogContainer `json:"containers,omitempty"`
}

// StatusLogContainer is one container status in a StatusLogLine.
type StatusLogContainer struct {
	Name         string `json:"name"`
	ContainerID  string `json:"containerID,omitempty"`
	State        string `json:"state"`
	RestartCount int32  `json:"restartCount"`
	ExitCode     int32  `json:"exitCode,omitempty"`
	// StartedAt and FinishedAt are the runtime's times for the current
	// state (running: StartedAt; terminated: both).
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// LastTerminatedID is the container ID in lastState.terminated.
	LastTerminatedID string `json:"lastTerminatedID,omitempty"`
}

// logSink is the agent's status sink with --status-log: it keeps the
// statuses as the default sink does (a podstatus.MemorySink) and appends a
// line per delivered status to w, in one write each.
type logSink struct {
	mem *podstatus.MemorySink
	w   io.Writer
	now func() time.Time
}

func newLogSink(w io.Writer) *logSink {
	return &logSink{mem: podstatus.NewMemorySink(), w: w, now: time.Now}
}

// SyncPodStatus records the status, then logs it. A failed write is not the
// agent's problem: the status is still taken.
func (s *logSink) SyncPodStatus(ctx context.Context, pod *v1.Pod, st v1.PodStatus) error {
	if err := s.mem.SyncPodStatus(ctx, pod, st); err != nil {
		return err
	}
	line := StatusLogLine{Time: s.now(), Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Phase: st.Phase}
	for _, cs := range append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
		c := StatusLogContainer{Name: cs.Name, ContainerID: cs.ContainerID, RestartCount: cs.RestartCount}
		c.State, _ = containerState(cs)
		if r := cs.State.Running; r != nil && !r.StartedAt.IsZero() {
			c.StartedAt = &r.StartedAt.Time
		}
		if t := cs.State.Terminated; t != nil {
			c.ExitCode = t.ExitCode
			if !t.StartedAt.IsZero() {
				c.StartedAt = &t.StartedAt.Time
			}
			if !t.FinishedAt.IsZero() {
				c.FinishedAt = &t.FinishedAt.Time
			}
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			c.LastTerminatedID = t.ContainerID
		}
		line.Containers = append(line.Containers, c)
	}
	s.write(line)
	return nil
}

// DeletePod forgets the pod and logs the deletion.
func (s *logSink) DeletePod(ctx context.Context, pod *v1.Pod) error {
	if err := s.mem.DeletePod(ctx, pod); err != nil {
		return err
	}
	s.write(StatusLogLine{Time: s.now(), Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Deleted: true})
	return nil
}

func (s *logSink) write(line StatusLogLine) {
	data, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = s.w.Write(append(data, '\n'))
}
