package apiserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	ckpt "github.com/nodekit/nodekit/internal/checkpoint"
	"github.com/nodekit/nodekit/internal/fsutil"
	"github.com/nodekit/nodekit/lifecycle"
	"github.com/nodekit/nodekit/volumemgr"
)

// Defaults of PersistConfig.
const (
	DefaultAPITimeout = 5 * time.Second
	DefaultRetryAfter = 5 * time.Second
	DefaultSyncPeriod = time.Minute
)

// The sub-directories of PersistConfig.Dir.
const (
	ConfigMapsDir = "configmaps"
	SecretsDir    = "secrets"
	TokensDir     = "tokens"
)

// PersistConfig configures a Persisted object source.
type PersistConfig struct {
	// Client reads the objects from the API server (required).
	Client kubernetes.Interface
	// Dir keeps the copies: Dir/configmaps/<namespace>_<name> and
	// Dir/secrets/<namespace>_<name> (names too long for one path segment
	// become "h-<sha256>"). Required. Directories are created 0700, files
	// 0600.
	Dir string
	// Pods lists the pods the node runs; Sync removes the copies no pod
	// references any more. Nil: nothing is ever removed for that reason.
	Pods func() []*v1.Pod
	// PodsReady reports whether Pods is complete (every pod source seen);
	// Sync prunes only then, so a half-known pod set never deletes a copy
	// a pod still needs. Nil: Pods is always complete.
	PodsReady func() bool
	// APITimeout bounds each API server call (default DefaultAPITimeout).
	APITimeout time.Duration
	// RetryAfter: after a call fails for a reason other than "not found"
	// or "forbidden", objects that have a copy on disk are served from it
	// without asking the API server for this long (default
	// DefaultRetryAfter).
	RetryAfter time.Duration
	// SyncPeriod is how often Run calls Sync (default DefaultSyncPeriod).
	SyncPeriod time.Duration
	Clock      clock.WithTicker
	// Logger; default zap.NewNop(). Named "volumemgr.apiserver".
	Logger *zap.Logger
	// FS is the file system for the copies (default
	// internal/checkpoint.OS{}). Listing and chmod use the os package.
	FS ckpt.FS
}

// Persisted is an object source that keeps a copy on disk of every
// configMap and secret it has read from the API server, so a pod can start
// again after a reboot while the API server is unreachable. It satisfies
// volumemgr.ObjectSource, volumemgr.TokenSource and kuberuntime.EnvSourceGetter.
//
// A read asks the API server first. The object it gets is written to disk
// (atomically, with a checksum, only when it changed) and returned; an
// object the API server says does not exist is removed from disk; on any
// other error (the API server unreachable, timing out, overloaded) the disk
// copy is returned when there is one, else the error. "Forbidden" is not
// served from disk either: the API server is there and says no. A corrupt
// copy is set aside as <file>.corrupt (and logged); the others still load.
// Service account tokens are kept too (the last one per pod, service
// account and audience) and served when the API server cannot answer.
type Persisted struct {
	once       lifecycle.Once
	live       *Objects
	dir        string
	pods       func() []*v1.Pod
	podsReady  func() bool
	apiTimeout time.Duration
	retryAfter time.Duration
	period     time.Duration
	clock      clock.WithTicker
	log        *zap.Logger
	fs         ckpt.FS

	mu        sync.Mutex
	written   map[objKey][sha256.Size]byte // payload hashes on disk, as written or read by us
	failedAt  time.Time                    // last unreachable error; zero when none
	offline   bool                         // logged the switch to the disk copies
	dirsReady map[string]bool
}

// objKey names one object.
type objKey struct{ kind, namespace, name string }

func (k objKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

// NewPersisted validates cfg and fills its defaults. It does no I/O.
func NewPersisted(cfg PersistConfig) (*Persisted, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.Dir == "" || strings.ContainsRune(cfg.Dir, 0) {
		errs = append(errs, fmt.Errorf("%w: Dir is required", ErrInvalidConfig))
	}
	if cfg.APITimeout < 0 || cfg.RetryAfter < 0 || cfg.SyncPeriod < 0 {
		errs = append(errs, fmt.Errorf("%w: APITimeout, RetryAfter and SyncPeriod must not be negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p := &Persisted{
		live:       &Objects{client: cfg.Client},
		dir:        cfg.Dir,
		pods:       cfg.Pods,
		podsReady:  cfg.PodsReady,
		apiTimeout: cfg.APITimeout,
		retryAfter: cfg.RetryAfter,
		period:     cfg.SyncPeriod,
		clock:      cfg.Clock,
		log:        cfg.Logger,
		fs:         cfg.FS,
		written:    map[objKey][sha256.Size]byte{},
		dirsReady:  map[string]bool{},
	}
	if p.apiTimeout == 0 {
		p.apiTimeout = DefaultAPITimeout
	}
	if p.retryAfter == 0 {
		p.retryAfter = DefaultRetryAfter
	}
	if p.period == 0 {
		p.period = DefaultSyncPeriod
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = zap.NewNop()
	}
	p.log = p.log.Named("volumemgr.apiserver")
	if p.fs == nil {
		p.fs = ckpt.OS{}
	}
	return p, nil
}

// ConfigMap returns the configMap from the API server, or its disk copy
// when the API server cannot answer (see Persisted).
func (p *Persisted) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	var out v1.ConfigMap
	err := p.get(ctx, objKey{"configmap", namespace, name}, &out, func(ctx context.Context) (any, error) {
		return p.live.ConfigMap(ctx, namespace, name)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Secret returns the secret from the API server, or its disk copy when the
// API server cannot answer (see Persisted).
func (p *Persisted) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	var out v1.Secret
	err := p.get(ctx, objKey{"secret", namespace, name}, &out, func(ctx context.Context) (any, error) {
		return p.live.Secret(ctx, namespace, name)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// storedToken is the payload of a token file.
type storedToken struct {
	Kind           string    `json:"kind"` // "Token"
	PodUID         string    `json:"podUID"`
	Namespace      string    `json:"namespace"`
	Pod            string    `json:"pod"`
	ServiceAccount string    `json:"serviceAccount"`
	Audience       string    `json:"audience"`
	Token          string    `json:"token"`
	Stored         time.Time `json:"stored"`
}

func tokenFile(pod *v1.Pod, sa, audience string) string {
	sum := sha256.Sum256([]byte(string(pod.UID) + "\x00" + sa + "\x00" + audience))
	return "t-" + hex.EncodeToString(sum[:])
}

// ServiceAccountToken asks the API server for a token bound to the pod and
// keeps the last one it got on disk (Dir/tokens, 0600). When the API server
// cannot answer (not "forbidden", not "not found"), the stored token is
// returned, whatever its expiry: the pod can start offline, and the token
// is replaced by a fresh one on the next refresh of the volume once the API
// server answers.
func (p *Persisted) ServiceAccountToken(ctx context.Context, pod *v1.Pod, audience string, expirationSeconds int64) (string, error) {
	if pod == nil {
		return "", fmt.Errorf("%w: no pod", ErrInvalidConfig)
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	dir, file := filepath.Join(p.dir, TokensDir), tokenFile(pod, sa, audience)
	if !p.recentlyUnreachable() {
		cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
		tok, err := p.live.ServiceAccountToken(cctx, pod, audience, expirationSeconds)
		cancel()
		switch {
		case err == nil:
			p.markReachable()
			data, merr := json.Marshal(storedToken{Kind: "Token", PodUID: string(pod.UID), Namespace: pod.Namespace, Pod: pod.Name,
				ServiceAccount: sa, Audience: audience, Token: tok, Stored: p.clock.Now()})
			if merr == nil {
				p.mu.Lock()
				werr := p.ensureDir(dir)
				if werr == nil {
					werr = ckpt.WriteFS(p.fs, dir, file, data)
				}
				p.mu.Unlock()
				if werr != nil {
					p.log.Warn("cannot store the service account token on disk", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(werr))
				}
			}
			return tok, nil
		case ctx.Err() != nil || apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
			return "", err
		default:
			p.markUnreachable(err)
			if tok, ok := p.readToken(dir, file, pod); ok {
				p.log.Info("API server unreachable: serving the stored service account token", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.NamedError("cause", err))
				return tok, nil
			}
			return "", err
		}
	}
	if tok, ok := p.readToken(dir, file, pod); ok {
		return tok, nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	defer cancel()
	return p.live.ServiceAccountToken(cctx, pod, audience, expirationSeconds)
}

func (p *Persisted) readToken(dir, file string, pod *v1.Pod) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	data, err := ckpt.ReadFS(p.fs, dir, file)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			p.setAsideLocked(dir, file, err)
		}
		return "", false
	}
	var st storedToken
	if err := json.Unmarshal(data, &st); err != nil || st.Kind != "Token" || st.PodUID != string(pod.UID) || st.Token == "" {
		if err == nil {
			err = errors.New("not a token of this pod")
		}
		p.setAsideLocked(dir, file, err)
		return "", false
	}
	return st.Token, true
}

// pruneTokens removes the stored tokens of pods not in uids (and corrupt
// ones: set aside).
func (p *Persisted) pruneTokens(uids map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dir := filepath.Join(p.dir, TokensDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "t-") || strings.Contains(name, ".corrupt") {
			if strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-") {
				_ = p.fs.Remove(filepath.Join(dir, name))
			}
			continue
		}
		data, err := ckpt.ReadFS(p.fs, dir, name)
		var st storedToken
		if err == nil {
			err = json.Unmarshal(data, &st)
		}
		if err != nil {
			p.setAsideLocked(dir, name, err)
			continue
		}
		if uids[st.PodUID] {
			continue
		}
		if err := p.fs.Remove(filepath.Join(dir, name)); err == nil {
			p.log.Info("removed the stored token of a pod that is gone", zap.String("pod", st.Namespace+"/"+st.Pod))
		}
	}
}

// get reads k from the API server through fetch (unless it recently
// failed and a copy exists), persists or removes the copy, and decodes the
// result into out.
func (p *Persisted) get(ctx context.Context, k objKey, out any, fetch func(context.Context) (any, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.recentlyUnreachable() {
		if ok, err := p.readCopy(k, out); err != nil {
			return err
		} else if ok {
			p.log.Debug("served from disk (API server recently unreachable)", zap.Stringer("object", k))
			return nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	obj, err := fetch(cctx)
	cancel()
	switch {
	case err == nil:
		p.markReachable()
		data, merr := marshalObject(obj)
		if merr != nil {
			return merr
		}
		if werr := p.writeCopy(k, data); werr != nil {
			p.log.Warn("cannot store a copy on disk; serving the API server's object", zap.Stringer("object", k), zap.Error(werr))
		}
		return json.Unmarshal(data, out)
	case errors.Is(err, volumemgr.ErrObjectNotFound):
		p.markReachable()
		if rerr := p.removeCopy(k); rerr != nil {
			p.log.Warn("cannot remove the disk copy of a deleted object", zap.Stringer("object", k), zap.Error(rerr))
		}
		return err
	case ctx.Err() != nil:
		return err // the caller gave up
	case apierrors.IsForbidden(err):
		p.markReachable()
		return err
	}
	p.markUnreachable(err)
	ok, rerr := p.readCopy(k, out)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	if !ok {
		return err
	}
	p.log.Info("API server unreachable: serving the copy on disk", zap.Stringer("object", k), zap.NamedError("cause", err))
	return nil
}

// recentlyUnreachable reports whether the last failure is less than
// RetryAfter old. A clock that went back before the failure ends the
// wait, so a jump never keeps the agent off the API server.
func (p *Persisted) recentlyUnreachable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failedAt.IsZero() {
		return false
	}
	since := p.clock.Since(p.failedAt)
	if since < 0 || since >= p.retryAfter {
		p.failedAt = time.Time{}
		return false
	}
	return true
}

func (p *Persisted) markUnreachable(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failedAt = p.clock.Now()
	if !p.offline {
		p.offline = true
		p.log.Warn("API server unreachable: configMaps and secrets come from the copies on disk", zap.Error(err))
	}
}

func (p *Persisted) markReachable() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failedAt = time.Time{}
	if p.offline {
		p.offline = false
		p.log.Info("API server reachable again: configMaps and secrets refreshed from it")
	}
}

func kindDir(kind string) string {
	if kind == "secret" {
		return SecretsDir
	}
	return ConfigMapsDir
}

// fileName is "<namespace>_<name>" ('_' is in neither a namespace nor an
// object name), or "h-<sha256 of namespace/name>" when that is not a safe
// checkpoint name.
func fileName(namespace, name string) string {
	n := namespace + "_" + name
	if namespace != "" && name != "" && !strings.Contains(namespace, "_") && ckpt.ValidateName(n) == nil &&
		!strings.Contains(n, ".corrupt") {
		return n
	}
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "h-" + hex.EncodeToString(sum[:])
}

func (p *Persisted) path(k objKey) (dir, file string) {
	return filepath.Join(p.dir, kindDir(k.kind)), fileName(k.namespace, k.name)
}

// ensureDir creates Dir and the kind's directory with mode 0700 and
// tightens them when they exist with a wider mode (once per instance).
func (p *Persisted) ensureDir(dir string) error {
	if p.dirsReady[dir] {
		return nil
	}
	if _, ok := p.fs.(ckpt.OS); ok {
		// Made and checked without following links: a symlinked Dir or
		// secrets/ would send the copies (and the chmod) elsewhere.
		if err := os.MkdirAll(filepath.Dir(p.dir), 0o700); err != nil {
			return err
		}
		for _, d := range []string{p.dir, dir} {
			if err := fsutil.EnsureDir(d, 0o700, true); err != nil {
				return err
			}
		}
		p.dirsReady[dir] = true
		return nil
	}
	for _, d := range []string{p.dir, dir} {
		if err := p.fs.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	p.dirsReady[dir] = true
	return nil
}

func (p *Persisted) writeCopy(k objKey, data []byte) error {
	sum := sha256.Sum256(data)
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.written[k]; ok && old == sum {
		return nil
	}
	dir, file := p.path(k)
	if err := p.ensureDir(dir); err != nil {
		return err
	}
	if err := ckpt.WriteFS(p.fs, dir, file, data); err != nil {
		delete(p.written, k)
		return err
	}
	p.written[k] = sum
	return nil
}

func (p *Persisted) removeCopy(k objKey) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.written, k)
	dir, file := p.path(k)
	err := p.fs.Remove(filepath.Join(dir, file))
	if err == nil {
		p.log.Info("removed the disk copy", zap.Stringer("object", k))
		return p.fs.SyncDir(dir)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readCopy decodes the disk copy of k into out; false when there is none
// usable (missing, or corrupt and set aside).
func (p *Persisted) readCopy(k objKey, out any) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	dir, file := p.path(k)
	meta, data, err := p.loadLocked(dir, file)
	if err != nil || data == nil {
		return false, err
	}
	if meta.Namespace != k.namespace || meta.Name != k.name {
		p.setAsideLocked(dir, file, fmt.Errorf("file holds %s/%s", meta.Namespace, meta.Name))
		return false, nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		p.setAsideLocked(dir, file, err)
		return false, nil
	}
	p.written[k] = sha256.Sum256(data)
	return true, nil
}

// loadLocked reads and checks dir/file. A missing file is (nil, nil, nil);
// a corrupt one is set aside and reported the same way.
func (p *Persisted) loadLocked(dir, file string) (*metav1.ObjectMeta, []byte, error) {
	data, err := ckpt.ReadFS(p.fs, dir, file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, nil
	case errors.Is(err, ckpt.ErrCorrupt) || errors.Is(err, ckpt.ErrTooLarge):
		p.setAsideLocked(dir, file, err)
		return nil, nil, nil
	case err != nil:
		return nil, nil, err
	}
	var obj struct {
		Kind     string            `json:"kind"`
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(data, &obj); err != nil || (obj.Kind != "ConfigMap" && obj.Kind != "Secret") {
		if err == nil {
			err = fmt.Errorf("kind %q is neither ConfigMap nor Secret", obj.Kind)
		}
		p.setAsideLocked(dir, file, err)
		return nil, nil, nil
	}
	return &obj.Metadata, data, nil
}

func (p *Persisted) setAsideLocked(dir, file string, cause error) {
	moved, err := ckpt.SetAsideFS(p.fs, dir, file)
	if err != nil {
		p.log.Error("corrupt copy on disk could not be set aside; ignoring it", zap.String("file", filepath.Join(dir, file)),
			zap.NamedError("cause", cause), zap.Error(err))
		return
	}
	p.log.Warn("corrupt copy on disk set aside; the other copies still load", zap.String("moved_to", moved), zap.NamedError("cause", cause))
}

// marshalObject encodes a ConfigMap or Secret as stored: with its kind and
// without managed fields.
func marshalObject(obj any) ([]byte, error) {
	switch o := obj.(type) {
	case *v1.ConfigMap:
		c := o.DeepCopy()
		c.APIVersion, c.Kind, c.ManagedFields = "v1", "ConfigMap", nil
		return json.Marshal(c)
	case *v1.Secret:
		c := o.DeepCopy()
		c.APIVersion, c.Kind, c.ManagedFields = "v1", "Secret", nil
		return json.Marshal(c)
	}
	return nil, fmt.Errorf("volumemgr/apiserver: cannot store %T", obj)
}

// Stored lists the objects on disk ("configmap ns/name", "secret ns/name"),
// sorted. Corrupt copies met on the way are set aside.
func (p *Persisted) Stored() ([]string, error) {
	keys, err := p.list()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	sort.Strings(out)
	return out, nil
}

// list reads every copy on disk, setting aside the corrupt ones and
// removing temporary files a crash left behind.
func (p *Persisted) list() ([]objKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []objKey
	for _, kind := range []string{"configmap", "secret"} {
		dir := filepath.Join(p.dir, kindDir(kind))
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			name := e.Name()
			switch {
			case strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-"):
				_ = p.fs.Remove(filepath.Join(dir, name))
				continue
			case strings.HasPrefix(name, ".") || strings.Contains(name, ".corrupt") || e.IsDir():
				continue
			}
			meta, data, err := p.loadLocked(dir, name)
			if err != nil {
				return nil, err
			}
			if data == nil {
				continue
			}
			k := objKey{kind, meta.Namespace, meta.Name}
			if fileName(k.namespace, k.name) != name {
				p.setAsideLocked(dir, name, fmt.Errorf("file holds %s", k))
				continue
			}
			out = append(out, k)
		}
	}
	return out, nil
}

// Referenced returns the configMaps and secrets pods use: volumes (secret,
// configMap, projected sources), env and envFrom of every container, and
// image pull secrets.
func Referenced(pods []*v1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, pod := range pods {
		for _, k := range podRefs(pod) {
			out[k.String()] = true
		}
	}
	return out
}

func podRefs(pod *v1.Pod) []objKey {
	if pod == nil {
		return nil
	}
	ns := pod.Namespace
	var out []objKey
	add := func(kind, name string) {
		if name != "" {
			out = append(out, objKey{kind, ns, name})
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			add("secret", v.Secret.SecretName)
		case v.ConfigMap != nil:
			add("configmap", v.ConfigMap.Name)
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					add("secret", s.Secret.Name)
				}
				if s.ConfigMap != nil {
					add("configmap", s.ConfigMap.Name)
				}
			}
		}
	}
	envs := func(c *v1.Container) {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				add("configmap", r.Name)
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				add("secret", r.Name)
			}
		}
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add("configmap", e.ConfigMapRef.Name)
			}
			if e.SecretRef != nil {
				add("secret", e.SecretRef.Name)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		envs(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		envs(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		envs(&c)
	}
	for _, s := range pod.Spec.ImagePullSecrets {
		add("secret", s.Name)
	}
	return out
}

// Sync brings the disk copies in line: when the pod set is complete
// (PodsReady), copies no pod references are removed; every other copy is
// read again from the API server (updated, or removed when the API server
// says it no longer exists). It stops refreshing at the first API server
// error that is not "not found" and keeps the remaining copies as they
// are. Corrupt copies are set aside.
func (p *Persisted) Sync(ctx context.Context) error {
	keys, err := p.list()
	if err != nil {
		return err
	}
	if p.pods != nil && (p.podsReady == nil || p.podsReady()) {
		pods := p.pods()
		uids := make(map[string]bool, len(pods))
		for _, pod := range pods {
			if pod != nil {
				uids[string(pod.UID)] = true
			}
		}
		p.pruneTokens(uids)
		refs := Referenced(pods)
		kept := keys[:0]
		for _, k := range keys {
			if refs[k.String()] {
				kept = append(kept, k)
				continue
			}
			if err := p.removeCopy(k); err != nil {
				p.log.Warn("cannot remove an unused copy", zap.Stringer("object", k), zap.Error(err))
			}
		}
		keys = kept
	}
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return err
		}
		if p.recentlyUnreachable() {
			return nil
		}
		var err error
		if k.kind == "secret" {
			_, err = p.Secret(ctx, k.namespace, k.name)
		} else {
			_, err = p.ConfigMap(ctx, k.namespace, k.name)
		}
		if err != nil && !errors.Is(err, volumemgr.ErrObjectNotFound) {
			p.log.Debug("refresh stopped", zap.Stringer("object", k), zap.Error(err))
			return nil
		}
	}
	return nil
}

// Inventory checks every copy on disk (setting aside the corrupt ones and
// removing the leftovers of interrupted writes) and logs how many
// configMaps and secrets are there to serve while the API server is
// unreachable. It returns the counts.
func (p *Persisted) Inventory() (configMaps, secrets int, err error) {
	keys, err := p.list()
	if err != nil {
		p.log.Warn("cannot read the copies on disk", zap.Error(err))
		return 0, 0, err
	}
	for _, k := range keys {
		if k.kind == "secret" {
			secrets++
		} else {
			configMaps++
		}
	}
	p.log.Info("configMaps and secrets stored on disk", zap.String("dir", p.dir),
		zap.Int("configmaps", configMaps), zap.Int("secrets", secrets))
	return configMaps, secrets, nil
}

// Run takes the Inventory, then calls Sync every SyncPeriod until ctx is
// done and returns nil then. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (p *Persisted) Run(ctx context.Context) error {
	if err := p.once.Start(); err != nil {
		return err
	}
	_, _, _ = p.Inventory() // logged
	t := p.clock.NewTicker(p.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
				p.log.Warn("sync of the disk copies failed", zap.Error(err))
			}
		}
	}
}
