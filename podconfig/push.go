package podconfig

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Defaults of PushConfig.
const (
	DefaultPushMaxBodyBytes = MaxManifestSize
	DefaultPushMaxPods      = 256
	// pushOrigin is the origin of pushed manifests: part of their generated
	// UID and named in their errors.
	pushOrigin = "push"
)

// PushConfig configures a PushHandler.
type PushConfig struct {
	// NodeName is the node the pods run on (name suffix, spec.nodeName).
	// Required.
	NodeName string
	// MaxBodyBytes caps a request body; larger bodies get 413. Default and
	// upper bound DefaultPushMaxBodyBytes.
	MaxBodyBytes int64
	// MaxPods caps the number of pods the handler holds; a request that
	// would exceed it gets 409. Default DefaultPushMaxPods.
	MaxPods int
	// Out receives the handler's full pod set as a SET after every change.
	// Required.
	Out chan<- kubetypes.PodUpdate
	// Clock is kept for uniformity with the other sources; the handler
	// currently measures no time. Default clock.RealClock{}.
	Clock clock.Clock
	// Logger; default zap.NewNop(). Named "podconfig.push".
	Logger *zap.Logger
}

// PushHandler is an http.Handler through which a client pushes static pods
// to the node. Mount it where you like (use http.StripPrefix when it is
// not at the root); it serves:
//
//	POST, PUT  a Pod or PodList (JSON or YAML): add or replace those pods
//	DELETE     /<namespace>/<name>, or ?namespace=&name=: remove one pod
//	GET, HEAD  the current pods as a JSON PodList
//
// Pods are defaulted and validated like every static pod (DecodeStaticPods
// with Source SourcePush) and keyed by namespace and generated name. After
// each change the full set is sent to Out as a SET, so PodConfig's
// per-source diff turns it into ADD/UPDATE/REMOVE. A change is committed
// only once its SET has been sent: when Out stays full until the client
// goes away, the answer is 503 and nothing changed.
//
// Pushes are handled one at a time: a push waits, without reading its body,
// until the one before it has been read, decoded and sent (or its own
// client goes: 503), so however many arrive at once, one body at most is in
// memory. Serve it with a ReadTimeout so a slow upload cannot hold the slot.
//
// Status codes: 200 success; 400 undecodable or invalid pods (the body is
// the error text); 404 DELETE of an unknown pod; 405 other methods; 409 too
// many pods; 413 body over MaxBodyBytes; 415 a content type other than
// JSON or YAML; 503 the update could not be delivered.
type PushHandler struct {
	nodeName string
	maxBody  int64
	maxPods  int
	out      chan<- kubetypes.PodUpdate
	clock    clock.Clock
	log      *zap.Logger

	once lifecycle.Once

	// lock is a one-slot semaphore rather than a mutex so waiting for it
	// respects the request context. It guards pods and orders the sends.
	lock chan struct{}
	pods map[string]*v1.Pod // key "<namespace>/<name>"
	// body is a one-slot semaphore taken before a request body is read
	// and held until it is decoded: however many pushes arrive at once,
	// one body at most is in memory (issue 23, item 2). It is separate
	// from lock so a slow upload does not hold up Pods and Sync.
	body chan struct{}
}

var _ http.Handler = (*PushHandler)(nil)

// NewPushHandler validates cfg and fills its defaults.
func NewPushHandler(cfg PushConfig) (*PushHandler, error) {
	var bad problems
	if cfg.NodeName == "" {
		bad.add("NodeName is required")
	}
	if cfg.Out == nil {
		bad.add("Out is required")
	}
	if cfg.MaxBodyBytes < 0 || cfg.MaxBodyBytes > DefaultPushMaxBodyBytes {
		bad.add("MaxBodyBytes %d is outside [0, %d]", cfg.MaxBodyBytes, DefaultPushMaxBodyBytes)
	}
	if cfg.MaxPods < 0 {
		bad.add("MaxPods must not be negative")
	}
	if err := bad.err(); err != nil {
		return nil, err
	}
	h := &PushHandler{
		nodeName: cfg.NodeName,
		maxBody:  cfg.MaxBodyBytes,
		maxPods:  cfg.MaxPods,
		out:      cfg.Out,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		lock:     make(chan struct{}, 1),
		pods:     map[string]*v1.Pod{},
		body:     make(chan struct{}, 1),
	}
	if h.maxBody == 0 {
		h.maxBody = DefaultPushMaxBodyBytes
	}
	if h.maxPods == 0 {
		h.maxPods = DefaultPushMaxPods
	}
	if h.clock == nil {
		h.clock = clock.RealClock{}
	}
	if h.log == nil {
		h.log = zap.NewNop()
	}
	h.log = h.log.Named("podconfig.push")
	return h, nil
}

func (h *PushHandler) acquire(ctx context.Context) error {
	select {
	case h.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h *PushHandler) release() { <-h.lock }

// Sync sends the current set as a SET (empty at first), waiting for ctx.
// Call it at start so PodConfig counts the push source as seen before any
// client has pushed.
func (h *PushHandler) Sync(ctx context.Context) error {
	if err := h.acquire(ctx); err != nil {
		return err
	}
	defer h.release()
	return h.send(ctx, h.pods)
}

// Run makes the handler a pod source: it sends the current set once (so
// PodConfig counts the push source as seen before any client has pushed)
// and then waits for ctx; pushes are sent by ServeHTTP as they come. It
// returns nil once ctx is done, and an error only when the first send
// fails for another reason. Serving the handler (an http.Server, or a mux
// of the program's own) is the caller's job; the Builder's WithPushSource
// does both. See package lifecycle for the contract; a second call returns
// ErrAlreadyRan.
func (h *PushHandler) Run(ctx context.Context) error {
	if err := h.once.Start(); err != nil {
		return err
	}
	if err := h.Sync(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	<-ctx.Done()
	return nil
}

// Pods returns deep copies of the current pods, sorted by namespace and name.
func (h *PushHandler) Pods(ctx context.Context) ([]*v1.Pod, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	pods := sortedPods(h.pods)
	for i, p := range pods {
		pods[i] = p.DeepCopy()
	}
	return pods, nil
}

func (h *PushHandler) send(ctx context.Context, set map[string]*v1.Pod) error {
	u := kubetypes.PodUpdate{Pods: sortedPods(set), Op: kubetypes.SET, Source: kubetypes.SourcePush}
	select {
	case h.out <- u:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sortedPods(set map[string]*v1.Pod) []*v1.Pod {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pods := make([]*v1.Pod, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, set[k])
	}
	return pods
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// ServeHTTP implements http.Handler.
func (h *PushHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		h.serveList(w, r)
	case http.MethodPost, http.MethodPut:
		h.serveApply(w, r)
	case http.MethodDelete:
		h.serveDelete(w, r)
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, PUT, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (h *PushHandler) serveList(w http.ResponseWriter, r *http.Request) {
	pods, err := h.Pods(r.Context())
	if err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	writePodList(w, pods)
}

func writePodList(w http.ResponseWriter, pods []*v1.Pod) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	b, err := json.Marshal(&list)
	if err != nil {
		http.Error(w, "cannot encode pods", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// pushContentType reports whether a POST/PUT media type is accepted (an
// absent Content-Type is accepted too).
func pushContentType(mt string) bool {
	switch mt {
	case "application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml", "text/plain":
		return true
	}
	return false
}

func (h *PushHandler) serveApply(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !pushContentType(mt) {
			http.Error(w, "content type must be JSON or YAML", http.StatusUnsupportedMediaType)
			return
		}
	}
	if r.ContentLength > h.maxBody {
		http.Error(w, fmt.Sprintf("body larger than %d bytes", h.maxBody), http.StatusRequestEntityTooLarge)
		return
	}
	// Take the body slot before reading: the pushes waiting for it hold no
	// body in memory.
	ctx := r.Context()
	select {
	case h.body <- struct{}{}:
	case <-ctx.Done():
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	defer func() { <-h.body }()
	data, err := readBody(http.MaxBytesReader(w, r.Body, h.maxBody), r.ContentLength, h.maxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("body larger than %d bytes", h.maxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	// Take the one slot before decoding: concurrent pushes then cost one
	// decode at a time, not one each at once.
	if err := h.acquire(ctx); err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	defer h.release()
	pods, err := DecodeStaticPods(data, StaticPodOptions{NodeName: h.nodeName, Source: kubetypes.SourcePush, Origin: pushOrigin})
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		http.Error(w, err.Error(), code)
		return
	}
	if len(pods) == 0 {
		http.Error(w, "no pods in the body", http.StatusBadRequest)
		return
	}
	seen := make(map[string]bool, len(pods))
	for _, p := range pods {
		k := podKey(p.Namespace, p.Name)
		if seen[k] {
			http.Error(w, fmt.Sprintf("pod %s appears twice in the body", k), http.StatusBadRequest)
			return
		}
		seen[k] = true
	}

	next := make(map[string]*v1.Pod, len(h.pods)+len(pods))
	for k, p := range h.pods {
		next[k] = p
	}
	for _, p := range pods {
		next[podKey(p.Namespace, p.Name)] = p
	}
	if len(next) > h.maxPods {
		http.Error(w, fmt.Sprintf("more than %d pods", h.maxPods), http.StatusConflict)
		return
	}
	if err := h.send(ctx, next); err != nil {
		h.log.Warn("pushed pods not delivered", zap.Error(err), zap.String("remote", r.RemoteAddr))
		http.Error(w, "update could not be delivered", http.StatusServiceUnavailable)
		return
	}
	h.pods = next
	names := make([]string, 0, len(pods))
	for _, p := range pods {
		names = append(names, podKey(p.Namespace, p.Name))
	}
	h.log.Info("pods pushed", zap.Strings("pods", names), zap.Int("total", len(next)), zap.String("remote", r.RemoteAddr))
	writePodList(w, pods)
}

func (h *PushHandler) serveDelete(w http.ResponseWriter, r *http.Request) {
	ns, name := "", ""
	if p := strings.Trim(r.URL.Path, "/"); p != "" {
		parts := strings.Split(p, "/")
		if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
			http.Error(w, "path must be /<namespace>/<name>", http.StatusBadRequest)
			return
		}
		ns, name = parts[0], parts[1]
	} else {
		q := r.URL.Query()
		ns, name = q.Get("namespace"), q.Get("name")
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	if name == "" {
		http.Error(w, "name is required: DELETE /<namespace>/<name> or ?namespace=&name=", http.StatusBadRequest)
		return
	}

	ctx := r.Context()
	if err := h.acquire(ctx); err != nil {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	defer h.release()
	// Accept the stored name ("web-node1") or the name as pushed ("web").
	key := podKey(ns, name)
	if _, ok := h.pods[key]; !ok {
		key = podKey(ns, StaticPodName(name, h.nodeName))
	}
	if _, ok := h.pods[key]; !ok {
		http.Error(w, "pod not found", http.StatusNotFound)
		return
	}
	next := make(map[string]*v1.Pod, len(h.pods))
	for k, p := range h.pods {
		if k != key {
			next[k] = p
		}
	}
	if err := h.send(ctx, next); err != nil {
		h.log.Warn("pod removal not delivered", zap.Error(err), zap.String("remote", r.RemoteAddr))
		http.Error(w, "update could not be delivered", http.StatusServiceUnavailable)
		return
	}
	h.pods = next
	h.log.Info("pod removed", zap.String("pod", key), zap.Int("total", len(next)), zap.String("remote", r.RemoteAddr))
	w.WriteHeader(http.StatusOK)
}

// readBody reads r to the end, into one buffer of the declared length when
// there is one (at most max): io.ReadAll, which grows its buffer as it
// goes, allocates about 2.2 times a 10 MiB body.
func readBody(r io.Reader, length, max int64) ([]byte, error) {
	if length <= 0 {
		return io.ReadAll(r)
	}
	buf := make([]byte, 0, min(length, max)+1) // + 1: room for the read that sees EOF
	for len(buf) < cap(buf) {
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	rest, err := io.ReadAll(r) // longer than declared
	return append(buf, rest...), err
}
