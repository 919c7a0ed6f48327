package containerdevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/lifecycle"
)

// Defaults of Config.
const (
	DefaultNamespace  = "k8s.io"
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
	// DefaultOOMMemory is how many containers with an OOM kill but no exit
	// yet the watcher remembers (the oldest are forgotten first).
	DefaultOOMMemory = 1024
)

// maxUnixPath is the longest socket path a sockaddr_un holds.
const maxUnixPath = 107

// Type is the kind of an Event.
type Type string

const (
	// Subscribed: a stream was (re)established. Events that happened
	// while no stream was open (before the first, between two) were
	// lost: a consumer relists on every Subscribed after the first.
	Subscribed Type = "Subscribed"
	// Exit: a container's main process exited (TaskExit of its init
	// process; exits of exec processes are not delivered).
	Exit Type = "Exit"
	// OOM: the kernel's OOM killer killed a process of the container
	// (TaskOOM). Its Exit follows if the killed process was the main one.
	OOM Type = "OOM"
)

// Event is one event from containerd's event service, decoded.
type Event struct {
	Type Type
	// Namespace is the containerd namespace (Config.Namespace).
	Namespace string
	// ContainerID is the containerd container id, which is the CRI
	// container (or sandbox) id in the CRI plugin's namespace.
	ContainerID string
	// Pid is the exited process's id (Exit).
	Pid uint32
	// ExitCode is the process's exit status as containerd reports it
	// (128+signal for a process killed by a signal), as CRI reports it.
	ExitCode int32
	// FinishedAt is when the process exited (Exit; the envelope's time if
	// the event carries none).
	FinishedAt time.Time
	// OOMKilled: an OOM event was seen for the container before this
	// Exit (containerd's CRI then reports the reason "OOMKilled").
	OOMKilled bool
	// Published is when containerd published the event.
	Published time.Time
	// Attempt counts the streams opened so far (Subscribed: 1 for the
	// first, more after reconnects).
	Attempt int
}

// Handler receives events, in order, from Run's goroutine. It must not
// block for long: the stream is not read while it runs.
type Handler func(ctx context.Context, ev Event)

// Config configures a Watcher. Handler and one of Endpoint and Conn are
// required.
type Config struct {
	// Endpoint is containerd's socket ("unix:///run/containerd/containerd.sock"
	// or the absolute path); the event service is served on the same
	// socket as CRI. Run dials it and closes the connection when it ends.
	Endpoint string
	// Conn, if set instead of Endpoint, is used as it is and not closed.
	Conn grpc.ClientConnInterface
	// Namespace is the containerd namespace watched (default "k8s.io",
	// the CRI plugin's).
	Namespace string
	// Handler receives the events. Required.
	Handler Handler
	// MinBackoff and MaxBackoff bound the pause before reconnecting after
	// the stream failed; it doubles after each failure and starts over
	// after a stream that delivered an event or lived MaxBackoff
	// (defaults 100ms and 10s).
	MinBackoff, MaxBackoff time.Duration
	// OOMMemory bounds how many containers with an OOM kill and no exit
	// yet are remembered for Event.OOMKilled (default 1024).
	OOMMemory int
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to zap.NewNop(); it is named "containerdevents".
	Logger *zap.Logger
}

// Stats counts what a Watcher did.
type Stats struct {
	// Streams is how many streams were opened.
	Streams uint64
	// Delivered is how many Exit and OOM events went to the Handler.
	Delivered uint64
	// Ignored is how many envelopes were skipped: malformed, of another
	// namespace or topic, of an unknown type, or exits of exec processes.
	Ignored uint64
}

// Watcher follows containerd's task exit and OOM events. Create it with New.
type Watcher struct {
	cfg     Config
	target  string
	filters []string
	log     *zap.Logger
	clock   clock.Clock
	once    lifecycle.Once

	streams, delivered, ignored atomic.Uint64

	// Owned by Run's goroutine.
	oom      map[string]struct{}
	oomOrder []string
}

// New validates cfg, fills defaults and returns a Watcher. It does no I/O.
func New(cfg Config) (*Watcher, error) {
	w := &Watcher{}
	var errs []error
	switch {
	case cfg.Conn != nil && cfg.Endpoint != "":
		errs = append(errs, fmt.Errorf("%w: give Endpoint or Conn, not both", ErrInvalidConfig))
	case cfg.Conn == nil:
		path, err := socketPath(cfg.Endpoint)
		if err != nil {
			errs = append(errs, err)
		}
		w.target = "unix://" + path
	}
	if cfg.Handler == nil {
		errs = append(errs, fmt.Errorf("%w: Handler is required", ErrInvalidConfig))
	}
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if strings.ContainsAny(cfg.Namespace, "\"\\\n") {
		errs = append(errs, fmt.Errorf("%w: Namespace %q has a character a filter cannot hold", ErrInvalidConfig, cfg.Namespace))
	}
	negative := cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 || cfg.OOMMemory < 0
	if negative {
		errs = append(errs, fmt.Errorf("%w: MinBackoff %v, MaxBackoff %v and OOMMemory %d must not be negative",
			ErrInvalidConfig, cfg.MinBackoff, cfg.MaxBackoff, cfg.OOMMemory))
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if !negative && cfg.MaxBackoff < cfg.MinBackoff {
		errs = append(errs, fmt.Errorf("%w: MaxBackoff %v is below MinBackoff %v", ErrInvalidConfig, cfg.MaxBackoff, cfg.MinBackoff))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.OOMMemory == 0 {
		cfg.OOMMemory = DefaultOOMMemory
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	w.cfg = cfg
	w.log = cfg.Logger.Named("containerdevents")
	w.clock = cfg.Clock
	w.filters = Filters(cfg.Namespace)
	w.oom = make(map[string]struct{})
	return w, nil
}

// Filters returns the subscription filters of a Watcher of namespace: the
// exit and OOM topics of that namespace (containerd ORs the filters).
func Filters(namespace string) []string {
	ns := strconv.Quote(namespace)
	return []string{
		"namespace==" + ns + ",topic==" + strconv.Quote(TopicExit),
		"namespace==" + ns + ",topic==" + strconv.Quote(TopicOOM),
	}
}

// socketPath returns the absolute socket path of a unix endpoint.
func socketPath(ep string) (string, error) {
	if ep == "" {
		return "", fmt.Errorf("%w: Endpoint or Conn is required (Endpoint: unix:///path/to/containerd.sock)", ErrInvalidConfig)
	}
	p := ep
	if rest, ok := strings.CutPrefix(ep, "unix://"); ok {
		p = rest
	} else if i := strings.Index(ep, "://"); i >= 0 {
		return "", fmt.Errorf("%w: Endpoint %q: scheme %q is not supported (want unix:///path)", ErrInvalidConfig, ep, ep[:i])
	}
	if strings.IndexByte(p, 0) >= 0 || !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: Endpoint %q: want an absolute socket path", ErrInvalidConfig, ep)
	}
	p = filepath.Clean(p)
	if len(p) > maxUnixPath {
		return "", fmt.Errorf("%w: Endpoint %q: socket path is longer than %d bytes", ErrInvalidConfig, ep, maxUnixPath)
	}
	return p, nil
}

// Stats returns the counters so far.
func (w *Watcher) Stats() Stats {
	return Stats{Streams: w.streams.Load(), Delivered: w.delivered.Load(), Ignored: w.ignored.Load()}
}

// Run subscribes to the events and hands them to the Handler until ctx
// ends; a failed stream is reopened after a back-off. It returns nil when
// ctx ends, ErrUnsupported (wrapped) if the endpoint has no containerd
// event service. It returns only after every goroutine it started has
// ended. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (w *Watcher) Run(ctx context.Context) error {
	if err := w.once.Start(); err != nil {
		return err
	}

	conn := w.cfg.Conn
	if conn == nil {
		cc, err := grpc.NewClient(w.target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return fmt.Errorf("%w: Endpoint %s: %w", ErrInvalidConfig, w.target, err)
		}
		defer cc.Close()
		conn = cc
	}

	backoff := w.cfg.MinBackoff
	for attempt := 1; ; attempt++ {
		start := w.clock.Now()
		got, err := w.stream(ctx, conn, attempt)
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) == codes.Unimplemented {
			return fmt.Errorf("%w: %w", ErrUnsupported, err)
		}
		if got || w.clock.Since(start) >= w.cfg.MaxBackoff {
			backoff = w.cfg.MinBackoff
		}
		w.log.Warn("containerd event stream failed; reconnecting", zap.Int("attempt", attempt), zap.Duration("backoff", backoff), zap.Error(err))
		t := w.clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		backoff = min(2*backoff, w.cfg.MaxBackoff)
	}
}

var streamDesc = grpc.StreamDesc{StreamName: "Subscribe", ServerStreams: true}

// stream runs one subscription until it fails or ctx ends. got reports
// whether it received anything.
func (w *Watcher) stream(ctx context.Context, conn grpc.ClientConnInterface, attempt int) (got bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream, whatever happened
	s, err := conn.NewStream(sctx, &streamDesc, subscribeMethod, grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return false, err
	}
	req := rawMessage(encodeSubscribe(w.filters))
	if err := s.SendMsg(&req); err != nil {
		return false, err
	}
	if err := s.CloseSend(); err != nil {
		return false, err
	}
	w.streams.Add(1)
	w.log.Info("following containerd events", zap.String("namespace", w.cfg.Namespace), zap.Int("attempt", attempt))
	w.cfg.Handler(ctx, Event{Type: Subscribed, Namespace: w.cfg.Namespace, Attempt: attempt})
	for {
		var m rawMessage
		if err := s.RecvMsg(&m); err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("containerd ended the stream")
			}
			return got, err
		}
		got = true
		w.handle(ctx, m)
	}
}

// handle decodes one envelope and delivers its event, or counts and logs
// why not.
func (w *Watcher) handle(ctx context.Context, m []byte) {
	ev, err := w.decode(m)
	if err != nil {
		w.ignored.Add(1)
		w.log.Warn("ignoring containerd event", zap.Error(err))
		return
	}
	if ev.Type == "" {
		w.ignored.Add(1)
		return
	}
	w.delivered.Add(1)
	w.cfg.Handler(ctx, ev)
}

// decode turns an envelope into an Event. An event that is well formed but
// not for the Handler (another namespace or topic, an exec's exit) gives
// an Event without Type and no error.
func (w *Watcher) decode(m []byte) (Event, error) {
	env, err := decodeEnvelope(m)
	if err != nil {
		return Event{}, err
	}
	if env.Namespace != w.cfg.Namespace {
		w.log.Debug("ignoring event of another namespace", zap.String("namespace", env.Namespace), zap.String("topic", env.Topic))
		return Event{}, nil
	}
	ev := Event{Namespace: env.Namespace, Published: env.Timestamp}
	name := typeName(env.TypeURL)
	switch {
	case env.Topic == TopicExit && name == typeTaskExit:
		x, err := decodeTaskExit(env.Value)
		if err != nil {
			return Event{}, err
		}
		if x.ContainerID == "" {
			return Event{}, fmt.Errorf("%w: TaskExit without container_id", ErrMalformed)
		}
		if x.ID != "" && x.ID != x.ContainerID {
			w.log.Debug("ignoring the exit of an exec process", zap.String("container", x.ContainerID), zap.String("exec", x.ID))
			return Event{}, nil
		}
		ev.Type, ev.ContainerID, ev.Pid = Exit, x.ContainerID, x.Pid
		ev.ExitCode = int32(x.ExitStatus)
		ev.FinishedAt = x.ExitedAt
		if ev.FinishedAt.IsZero() {
			ev.FinishedAt = env.Timestamp
		}
		if _, ok := w.oom[x.ContainerID]; ok {
			ev.OOMKilled = true
			delete(w.oom, x.ContainerID)
		}
	case env.Topic == TopicOOM && name == typeTaskOOM:
		id, err := decodeTaskOOM(env.Value)
		if err != nil {
			return Event{}, err
		}
		if id == "" {
			return Event{}, fmt.Errorf("%w: TaskOOM without container_id", ErrMalformed)
		}
		ev.Type, ev.ContainerID = OOM, id
		w.rememberOOM(id)
	default:
		w.log.Debug("ignoring event of another topic or type", zap.String("topic", env.Topic), zap.String("type", env.TypeURL))
		return Event{}, nil
	}
	return ev, nil
}

// rememberOOM records an OOM kill until the container's exit, forgetting
// the oldest record beyond OOMMemory.
func (w *Watcher) rememberOOM(id string) {
	if _, ok := w.oom[id]; ok {
		return
	}
	w.oom[id] = struct{}{}
	w.oomOrder = append(w.oomOrder, id)
	for len(w.oom) > w.cfg.OOMMemory && len(w.oomOrder) > 0 {
		delete(w.oom, w.oomOrder[0])
		w.oomOrder = w.oomOrder[1:]
	}
	if len(w.oomOrder) > 2*w.cfg.OOMMemory {
		// Drop the ids that exits already removed from the map.
		kept := w.oomOrder[:0]
		for _, x := range w.oomOrder {
			if _, ok := w.oom[x]; ok {
				kept = append(kept, x)
			}
		}
		clear(w.oomOrder[len(kept):])
		w.oomOrder = kept
	}
}
