package pleg

import (
	"context"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodekit/nodekit/kubetypes"
)

// Reasons of an exited container, as containerd's CRI plugin reports them.
const (
	ReasonCompleted = "Completed"
	ReasonError     = "Error"
	ReasonOOMKilled = "OOMKilled"
)

// ContainerExit is a container's exit as the runtime's own event service
// reported it (runtime/containerdevents), ahead of the CRI.
type ContainerExit struct {
	// ID is the container's CRI id.
	ID string
	// ExitCode is the exit status (128+signal when killed by a signal).
	ExitCode int32
	// FinishedAt is when the container's main process exited.
	FinishedAt time.Time
	// OOMKilled: the OOM killer killed a process of the container.
	OOMKilled bool
}

// Reason is the reason the CRI will report for the exit: OOMKilled,
// Completed (exit code 0) or Error.
func (x ContainerExit) Reason() string {
	switch {
	case x.OOMKilled:
		return ReasonOOMKilled
	case x.ExitCode == 0:
		return ReasonCompleted
	}
	return ReasonError
}

// ContainerExited applies an exit the runtime's events reported before its
// CRI shows it. If the last listing holds the container running, the pod's
// cached status gets the container exited (exit code, finish time, reason)
// at once and a ContainerDied is sent, without asking the runtime. Until
// the CRI shows the exit too, listings and status reads that still show the
// container running count it as exited: no ContainerStarted, no second
// ContainerDied, and statuses read from the runtime are stored with the
// exit applied. Once a listing shows it exited (or gone) the override is
// dropped.
//
// An exit already listed, or reported twice, changes nothing. An exit of a
// sandbox makes the pod relist (RequestRelist). An exit of a container
// no listing has shown yet (it started and died between two relists) is
// kept and a global relist is started at once (RelistSoon): it then counts
// as exited when listed; if that relist does not show it either (not a
// pod's container, or already removed), it is forgotten.
//
// ContainerExited waits for a relist in progress. It is safe for concurrent
// use; ctx is not used for I/O (none is done) and is kept for symmetry.
func (g *GenericPLEG) ContainerExited(_ context.Context, x ContainerExit) {
	if x.ID == "" {
		return
	}
	g.relistMu.Lock()
	defer g.relistMu.Unlock()
	if _, ok := g.exits[x.ID]; ok {
		return
	}
	uid, c, sandbox := g.findListed(x.ID)
	switch {
	case c == nil:
		g.log.Debug("exit of a container not listed yet; relisting", zap.String("container", x.ID))
		g.setExit(x.ID, &exitOverride{exit: x})
		g.RelistSoon()
		return
	case sandbox:
		g.RequestRelist(uid)
		return
	case toPLEGState(c.State) == stateExited:
		return // the relist was first
	}
	g.setExit(x.ID, &exitOverride{uid: uid, exit: x})

	now := g.clock.Now()
	cached, err := g.cache.Get(uid)
	patched := patchExits(cached, g.exits)
	if err != nil || patched == cached {
		// The cache lacks the container: read the pod (with the exit
		// applied) as soon as possible.
		g.RequestReinspect(uid)
		g.RequestRelist(uid)
	} else {
		patched.TimeStamp = now
		if !g.cache.Set(uid, patched, nil, now) && g.evented.Load() {
			return // the cache holds newer data from CRI events
		}
	}
	g.log.Debug("container exited (runtime event)", zap.String("pod", string(uid)), zap.String("container", x.ID),
		zap.Int32("exitCode", x.ExitCode), zap.Time("finishedAt", x.FinishedAt))
	g.send(&kubetypes.PodLifecycleEvent{ID: uid, Type: kubetypes.ContainerDied, Data: x.ID})
}

// RelistSoon makes a running Run relist every pod at once (for example
// after runtime events may have been lost); it never blocks.
func (g *GenericPLEG) RelistSoon() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// PendingExits returns how many exits reported by events the CRI has not
// shown yet.
func (g *GenericPLEG) PendingExits() int {
	g.exitMu.Lock()
	defer g.exitMu.Unlock()
	return len(g.exits)
}

// setExit and dropExit change g.exits; the caller holds relistMu.
func (g *GenericPLEG) setExit(id string, o *exitOverride) {
	g.exitMu.Lock()
	g.exits[id] = o
	g.exitMu.Unlock()
}

func (g *GenericPLEG) dropExit(id string) {
	g.exitMu.Lock()
	delete(g.exits, id)
	g.exitMu.Unlock()
}

// findListed finds a container or sandbox in the records, in the listing
// events were last computed against (old), else in the latest one. Called
// with relistMu.
func (g *GenericPLEG) findListed(id string) (types.UID, *kubetypes.Container, bool) {
	for _, cur := range [2]bool{false, true} {
		for uid, r := range g.records {
			p := r.old
			if cur {
				p = r.current
			}
			if p == nil {
				continue
			}
			for k, list := range [2][]*kubetypes.Container{p.Containers, p.Sandboxes} {
				for _, c := range list {
					if c != nil && c.ID == id {
						return uid, c, k == 1
					}
				}
			}
		}
	}
	return "", nil, false
}

// settleExits drops the overrides the runtime caught up with: the
// container is listed exited, or no listing has it. An override stays
// while the listing events were computed against (old) still shows the
// container not exited, so that dropping it sends nothing again. With uid
// set, only that pod's overrides (and unplaced ones it lists) are looked
// at. Called with relistMu after the records were reconciled.
func (g *GenericPLEG) settleExits(uid types.UID) {
	for id, o := range g.exits {
		if uid != "" && o.uid != "" && o.uid != uid {
			continue
		}
		at, c, _ := g.findListed(id)
		switch {
		case c == nil:
			if uid != "" && o.uid == "" {
				continue // a single pod's relist says nothing of other pods
			}
			g.dropExit(id)
		case toPLEGState(c.State) == stateExited:
			g.dropExit(id)
		case o.uid == "":
			g.exitMu.Lock()
			o.uid = at
			g.exitMu.Unlock()
		}
	}
}

// patchExits returns st with the containers in exits that st shows not
// exited set exited as the exit reported; st itself if there are none.
// st is not modified (it may be shared).
func patchExits(st *kubetypes.PodStatus, exits map[string]*exitOverride) *kubetypes.PodStatus {
	if st == nil || len(exits) == 0 {
		return st
	}
	var out *kubetypes.PodStatus
	for i, cs := range st.ContainerStatuses {
		if cs == nil || cs.State == kubetypes.ContainerStateExited {
			continue
		}
		o, ok := exits[cs.ID]
		if !ok {
			continue
		}
		if out == nil {
			cp := *st
			cp.ContainerStatuses = append([]*kubetypes.ContainerStatus(nil), st.ContainerStatuses...)
			out = &cp
		}
		c := *cs
		c.State = kubetypes.ContainerStateExited
		c.ExitCode = o.exit.ExitCode
		c.FinishedAt = o.exit.FinishedAt
		c.Reason = o.exit.Reason()
		c.Message = ""
		c.ExitUnconfirmed = true
		out.ContainerStatuses[i] = &c
	}
	if out == nil {
		return st
	}
	return out
}
