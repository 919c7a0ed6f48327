package fake

import (
	"context"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// subscriber is one GetContainerEvents stream: an unbounded queue filled
// under the runtime's mutex and drained by the subscriber's own goroutine.
type subscriber struct {
	queue []*runtimeapi.ContainerEventResponse
	wake  chan struct{}
}

func (r *Runtime) subscribe() *subscriber {
	s := &subscriber{wake: make(chan struct{}, 1)}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.mu.Unlock()
	return s
}

func (r *Runtime) unsubscribe(s *subscriber) {
	r.mu.Lock()
	delete(r.subs, s)
	r.mu.Unlock()
}

// publishLocked queues an event for every subscriber. The event's
// PodSandboxStatus and ContainersStatuses describe the pod after the change.
// Events are shared between subscribers: treat them as read-only.
func (r *Runtime) publishLocked(id string, typ runtimeapi.ContainerEventType, at int64, sb *sandbox) {
	if len(r.subs) == 0 {
		return
	}
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        id,
		ContainerEventType: typ,
		CreatedAt:          at,
		PodSandboxStatus:   r.sandboxStatusLocked(sb),
		ContainersStatuses: r.containerStatusesLocked(sb),
	}
	for s := range r.subs {
		s.queue = append(s.queue, ev)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// wakeSubscribersLocked makes subscribers recompute when the next simulated
// exit is due (after a change that moved it without an event).
func (r *Runtime) wakeSubscribersLocked() {
	for s := range r.subs {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// next returns the subscriber's queued events, waiting for some. While it
// waits it also watches the injected clock for the next simulated exit, so
// a STOPPED event comes when a process ends on its own even if nobody reads
// the runtime's state.
func (r *Runtime) next(ctx context.Context, s *subscriber) ([]*runtimeapi.ContainerEventResponse, error) {
	for {
		r.mu.Lock()
		now := r.nowNano()
		r.advanceAllLocked(now)
		if len(s.queue) > 0 {
			q := s.queue
			s.queue = nil
			r.mu.Unlock()
			return q, nil
		}
		at, pending := r.nextTransitionLocked()
		r.mu.Unlock()
		if pending {
			if err := r.waitUntil(ctx, at, s.wake); err != nil {
				return nil, err
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctxErr(ctx)
		case <-s.wake:
		}
	}
}

// GetContainerEvents sends container (and sandbox) lifecycle events to ch
// until ctx ends, then returns the context's error as a gRPC status. Sandbox
// events carry the sandbox id as ContainerId: CREATED and STARTED on
// RunPodSandbox, STOPPED on StopPodSandbox, DELETED on RemovePodSandbox.
// connectionEstablishedCallback, if not nil, is called once with a nil stream
// when the subscription is in place (there is no gRPC stream in process).
// With Config.EventsUnimplemented it returns Unimplemented at once.
func (r *Runtime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if err := r.begin(ctx, "GetContainerEvents", "", "", 0); err != nil {
		return err
	}
	if r.eventsUnimpl {
		return unimplemented("GetContainerEvents")
	}
	if ch == nil {
		return coded(codes.InvalidArgument, ErrInvalidArgument, "GetContainerEvents: nil channel")
	}
	s := r.subscribe()
	defer r.unsubscribe(s)
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(nil)
	}
	return r.streamEvents(ctx, s, func(ev *runtimeapi.ContainerEventResponse) error {
		select {
		case ch <- ev:
			return nil
		case <-ctx.Done():
			return ctxErr(ctx)
		}
	})
}

func (r *Runtime) streamEvents(ctx context.Context, s *subscriber, send func(*runtimeapi.ContainerEventResponse) error) error {
	for {
		evs, err := r.next(ctx, s)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}
