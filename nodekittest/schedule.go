package nodekittest

import "time"

// The agent's default periods that set its retry times (see the syncloop
// manual, "Retry timings").
const (
	// RelistPeriod: the PLEG relists every second.
	RelistPeriod = time.Second
	// WorkerBackOff: a pod whose sync failed (a container in back-off
	// included) is synced again 10s later (syncloop.DefaultBackOffPeriod,
	// without jitter).
	WorkerBackOff = 10 * time.Second
	// CrashBackOffInitial and CrashBackOffMax: a container's restart
	// back-off starts at 10s and doubles up to 5m (kuberuntime's, the
	// kubelet's).
	CrashBackOffInitial = 10 * time.Second
	CrashBackOffMax     = 5 * time.Minute
)

// CrashLoopStarts returns when the agent, at its default periods and
// without jitter (as Start sets it up), starts the first n instances of a
// container that exits as soon as it starts, in a pod with restart policy
// Always that arrived at 0.
//
// The first instance starts at 0. Each exit is seen by the next relist
// (one RelistPeriod later). The first exit is restarted at once: no
// back-off is recorded yet. Later exits are in back-off: the sync that
// sees one fails with CrashLoopBackOff and the pod worker retries every
// WorkerBackOff, and the first retry at or after exit + back-off starts
// the container; the back-off then doubles. Hence 0, 1s, 12s, 33s, 74s,
// 155s, ...: not 0, 10, 30, 70, because a restart waits for the pod worker's
// next retry, as the kubelet's does.
func CrashLoopStarts(n int) []time.Duration {
	return CrashLoopSchedule(n, RelistPeriod, WorkerBackOff, CrashBackOffInitial, CrashBackOffMax)
}

// CrashLoopSchedule is CrashLoopStarts with other periods.
func CrashLoopSchedule(n int, relist, retry, initial, max time.Duration) []time.Duration {
	if n <= 0 || relist <= 0 || retry <= 0 {
		return nil
	}
	starts := []time.Duration{0}
	var backoff time.Duration
	for len(starts) < n {
		exit := starts[len(starts)-1]
		t := (exit/relist + 1) * relist // the next relist sees the exit
		for t < exit+backoff {
			t += retry
		}
		starts = append(starts, t)
		if backoff == 0 {
			backoff = initial
		} else {
			backoff = min(2*backoff, max)
		}
	}
	return starts
}
