package containerdwire

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime/containerdevents"
	"github.com/nodekit/nodekit/pleg"
)

// Events makes b's agent follow containerd's own event service (package
// kuberuntime/containerdevents) at endpoint, or, if endpoint is empty, at
// the endpoint given to Builder.WithRuntimeEndpoint, and returns b. A
// container's exit (containerd's /tasks/exit, published within
// milliseconds) then goes straight to the PLEG
// (pleg.GenericPLEG.ContainerExited): the pod's status shows it, and the
// pod is synced, without waiting for the next relist or for containerd
// 1.6's CRI, which reports an exit hundreds of milliseconds later.
// Relisting goes on as the safety net; after a broken event stream the
// agent relists at once. When out is not nil, Build sets *out to the
// watcher (its Stats count the events).
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
func Events(b *nodekit.Builder, endpoint string, out **containerdevents.Watcher) *nodekit.Builder {
	return b.WithWiring(nodekit.Wiring{
		Call: "containerdwire.Events", Name: "containerd events", Rank: nodekit.RankContainerdEvents,
		Connect: func(a *nodekit.Agent) (start, run func(ctx context.Context) error, err error) {
			ep := endpoint
			if ep == "" {
				ep = a.RuntimeEndpoint()
			}
			if ep == "" {
				return nil, nil, errors.New("containerdevents: no endpoint given and no WithRuntimeEndpoint")
			}
			g := a.PLEG()
			if g == nil {
				return nil, nil, errors.New("containerdevents: the agent has no PLEG")
			}
			w, err := containerdevents.New(containerdevents.Config{
				Endpoint: ep, Handler: Handler(g), Clock: a.Clock(), Logger: a.Logger(),
			})
			if err != nil {
				return nil, nil, fmt.Errorf("containerdevents: %w", err)
			}
			if out != nil {
				*out = w
			}
			return nil, func(ctx context.Context) error {
				err := w.Run(ctx)
				if errors.Is(err, containerdevents.ErrUnsupported) {
					a.Logger().Warn("the runtime has no containerd event service; container exits are seen by relisting only", zap.Error(err))
					<-ctx.Done()
					return nil
				}
				if err != nil {
					return fmt.Errorf("containerd events: %w", err)
				}
				return nil
			}, nil
		},
	})
}

// Handler is the handler Events wires: it hands containerd's container
// exits to the PLEG (ContainerExited) and makes it relist at once after a
// reconnect (events may have been lost in between). For agents that wire
// a containerdevents.Watcher themselves.
func Handler(g *pleg.GenericPLEG) containerdevents.Handler {
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
