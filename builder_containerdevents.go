package nodekit

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
	"github.com/nodekit/nodekit/pleg"
)

// WithContainerdEvents makes the agent follow containerd's own event
// service (runtime/containerdevents) at endpoint, or, if endpoint is
// empty, at the endpoint given to WithRuntimeEndpoint. A container's exit
// (containerd's /tasks/exit, published within milliseconds) then goes
// straight to the PLEG (pleg.GenericPLEG.ContainerExited): the pod's status
// shows it, and the pod is synced, without waiting for the next relist or
// for containerd 1.6's CRI, which reports an exit hundreds of milliseconds
// later. Relisting goes on as the safety net; after a broken event stream
// the agent relists at once.
//
// An endpoint that is not containerd (no event service) is logged once and
// otherwise ignored, so the option is harmless there.
//
// Caveat: the pod is synced on the event, so a container restarted because
// of it can be created and started while containerd's CRI still lists the
// exited one as running (until its exit handling finishes, hundreds of
// milliseconds); for that moment the runtime shows two running containers
// for the pod (the PLEG keeps treating the old one as exited until the CRI
// agrees). The kubelet never overlaps them: it learns of exits from the
// CRI. examples/standalone therefore leaves this off unless asked.
func (b *Builder) WithContainerdEvents(endpoint string) *Builder {
	if b.containerdEvents {
		return b.fail("WithContainerdEvents given twice")
	}
	b.containerdEvents = true
	w := containerdEventsWiring{endpoint: endpoint}
	b.wired = append(b.wired, wiring{rank: rankContainerdEvents, connect: w.connect})
	return b
}

// containerdEventsWiring makes the watcher of WithContainerdEvents once
// the PLEG it feeds is made.
type containerdEventsWiring struct {
	endpoint string
}

func (w containerdEventsWiring) connect(bd *build) {
	ep := w.endpoint
	if ep == "" {
		ep = bd.b.endpoint
	}
	if ep == "" {
		bd.fail(configErr("containerdevents", "WithContainerdEvents: no endpoint given and no WithRuntimeEndpoint"))
		return
	}
	if err := bd.a.addContainerdEvents(ep, bd.log); err != nil {
		bd.fail(err)
	}
}

func (a *Agent) addContainerdEvents(endpoint string, log *zap.Logger) error {
	g := a.generic
	if g == nil {
		return configErr("containerdevents", "the agent has no PLEG")
	}
	w, err := containerdevents.New(containerdevents.Config{
		Endpoint: endpoint,
		Handler:  ContainerdEventHandler(g),
		Clock:    a.clock,
		Logger:   log,
	})
	if err != nil {
		return partErr("containerdevents", err)
	}
	a.containerdEvents = w
	a.parts = append(a.parts, extraPart{name: "containerd events", run: func(ctx context.Context) error {
		err := w.Run(ctx)
		if errors.Is(err, containerdevents.ErrUnsupported) {
			a.log.Warn("the runtime has no containerd event service; container exits are seen by relisting only", zap.Error(err))
			<-ctx.Done()
			return nil
		}
		if err != nil {
			return fmt.Errorf("containerd events: %w", err)
		}
		return nil
	}})
	return nil
}

// ContainerdEventHandler is the handler WithContainerdEvents wires: it
// hands containerd's container exits to the PLEG (ContainerExited) and
// makes it relist at once after a reconnect (events may have been lost in
// between). For agents that wire a containerdevents.Watcher themselves.
func ContainerdEventHandler(g *pleg.GenericPLEG) containerdevents.Handler {
	return func(ctx context.Context, ev containerdevents.Event) {
		switch ev.Type {
		case containerdevents.Exit:
			g.ContainerExited(ctx, pleg.ContainerExit{
				ID: ev.ContainerID, ExitCode: ev.ExitCode, FinishedAt: ev.FinishedAt, OOMKilled: ev.OOMKilled,
			})
		case containerdevents.Subscribed:
			if ev.Attempt > 1 {
				g.RelistSoon()
			}
		}
	}
}

// ContainerdEvents returns the watcher of containerd's events made by
// WithContainerdEvents, or nil.
func (a *Agent) ContainerdEvents() *containerdevents.Watcher { return a.containerdEvents }
