package apiserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/lifecycle"
)

// MirrorClientConfig configures a MirrorClient.
type MirrorClientConfig struct {
	// Client talks to the API server with the node's credential (required).
	Client kubernetes.Interface
	// NodeName is the node's name (required): mirror pods are bound to it
	// and owned by its Node object.
	NodeName string
	// StaticPods returns the pods the agent runs; Run keeps a mirror pod
	// for each static one among them (required by Run only). Give the
	// merged state of the pod sources (podconfig.PodConfig.MergedState),
	// not the pods the sync loop has got so far: an update still on its
	// way to the loop would make its mirror look orphaned.
	StaticPods func() []*v1.Pod
	// SourcesReady reports whether every pod source has sent its full
	// set (podconfig.PodConfig.SeenAllSources). Until it does, Run creates
	// and replaces mirror pods but deletes none that lacks a static pod:
	// after a restart the file source may not have listed the static pods
	// yet, and deleting their mirrors would recreate every one of them
	// (new UIDs, Pending again). Nil: always ready.
	SourcesReady func() bool
	// Period between two syncs of Run; default 10s.
	Period time.Duration
	Clock  clock.WithTicker
	Logger *zap.Logger
}

// MirrorClient keeps a mirror pod in the API server for every static pod
// the agent runs, as the kubelet does: the mirror has the static pod's
// metadata and spec, the annotation kubernetes.io/config.mirror set to the
// static pod's config hash, and the Node as its only (controller) owner. A mirror whose
// hash differs from its static pod's, or that is being deleted (a mirror
// pod's graceful deletion is never finished by anyone else), is deleted
// (grace 0, UID precondition) and created again; a mirror without a static
// pod is deleted, by Run only once every pod source is ready. A mirror
// whose hash matches is kept as it is, so an agent restart changes none.
type MirrorClient struct {
	cfg MirrorClientConfig
	log *zap.Logger

	mu      sync.Mutex
	nodeUID types.UID
	once    lifecycle.Once
}

// NewMirrorClient validates cfg and fills defaults. It does no I/O.
func NewMirrorClient(cfg MirrorClientConfig) (*MirrorClient, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig))
	}
	if cfg.Period < 0 {
		errs = append(errs, fmt.Errorf("%w: Period must not be negative", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Period == 0 {
		cfg.Period = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &MirrorClient{cfg: cfg, log: cfg.Logger.Named("podstatus.apiserver.mirror").With(zap.String("node", cfg.NodeName))}, nil
}

func fullName(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// node returns the Node's UID (read once).
func (m *MirrorClient) node(ctx context.Context) (types.UID, error) {
	m.mu.Lock()
	uid := m.nodeUID
	m.mu.Unlock()
	if uid != "" {
		return uid, nil
	}
	n, err := m.cfg.Client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading node %s: %w", m.cfg.NodeName, err)
	}
	m.mu.Lock()
	m.nodeUID = n.UID
	m.mu.Unlock()
	return n.UID, nil
}

// MirrorPod builds the mirror pod of a static pod: the node (name, uid) is
// its controller owner, as NodeRestriction requires.
func MirrorPod(static *v1.Pod, nodeName string, nodeUID types.UID) *v1.Pod {
	controller := true
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        static.Name,
			Namespace:   static.Namespace,
			Labels:      make(map[string]string, len(static.Labels)),
			Annotations: make(map[string]string, len(static.Annotations)+1),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: nodeName, UID: nodeUID, Controller: &controller,
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Labels {
		p.Labels[k] = v
	}
	for k, v := range static.Annotations {
		p.Annotations[k] = v
	}
	p.Annotations[kubetypes.ConfigMirrorAnnotation] = static.Annotations[kubetypes.ConfigHashAnnotation]
	p.Spec.NodeName = nodeName
	return p
}

// SyncMirrorPods makes the mirror pods in the API server match the static
// pods among pods: it creates the missing ones, recreates those of another
// hash and deletes those without a static pod. It goes on after an error
// and returns them all joined.
func (m *MirrorClient) SyncMirrorPods(ctx context.Context, pods []*v1.Pod) error {
	return m.sync(ctx, pods, true)
}

// sync is SyncMirrorPods; orphans are deleted only if deleteOrphans.
func (m *MirrorClient) sync(ctx context.Context, pods []*v1.Pod, deleteOrphans bool) error {
	list, err := m.cfg.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", m.cfg.NodeName).String(),
	})
	if err != nil {
		return fmt.Errorf("listing pods of node %s: %w", m.cfg.NodeName, err)
	}
	mirrors := make(map[string]*v1.Pod)
	for i := range list.Items {
		if p := &list.Items[i]; kubetypes.IsMirrorPod(p) {
			mirrors[fullName(p)] = p
		}
	}
	statics := make(map[string]*v1.Pod)
	for _, p := range pods {
		if p != nil && kubetypes.IsStaticPod(p) && !kubetypes.IsMirrorPod(p) {
			statics[fullName(p)] = p
		}
	}
	var errs []error
	names := make([]string, 0, len(statics))
	for n := range statics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		static := statics[n]
		mirror, ok := mirrors[n]
		if ok && isMirrorOf(mirror, static) {
			continue
		}
		if ok {
			// Stale, or being deleted (nobody else finishes a mirror's
			// graceful deletion): remove it now and create it again.
			if err := m.deleteMirror(ctx, mirror); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := m.create(ctx, static); err != nil {
			errs = append(errs, err)
		}
	}
	for n, mirror := range mirrors {
		if _, ok := statics[n]; ok || !deleteOrphans {
			continue
		}
		if err := m.deleteMirror(ctx, mirror); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *MirrorClient) create(ctx context.Context, static *v1.Pod) error {
	nodeUID, err := m.node(ctx)
	if err != nil {
		return err
	}
	_, err = m.cfg.Client.CoreV1().Pods(static.Namespace).Create(ctx, MirrorPod(static, m.cfg.NodeName, nodeUID), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating mirror pod %s: %w", fullName(static), err)
	}
	m.log.Debug("mirror pod created", zap.String("pod", fullName(static)))
	return nil
}

func (m *MirrorClient) deleteMirror(ctx context.Context, mirror *v1.Pod) error {
	uid := mirror.UID
	zero := int64(0)
	err := m.cfg.Client.CoreV1().Pods(mirror.Namespace).Delete(ctx, mirror.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting mirror pod %s: %w", fullName(mirror), err)
	}
	m.log.Debug("mirror pod deleted", zap.String("pod", fullName(mirror)))
	return nil
}

// Run syncs the mirror pods of cfg.StaticPods() at once and then every
// Period until ctx is done; errors are logged and the next sync tries
// again. Orphaned mirrors are deleted only by syncs that start with every
// pod source ready (cfg.SourcesReady). It returns nil when ctx ends. See package lifecycle for the contract; a second call returns ErrAlreadyRan.
func (m *MirrorClient) Run(ctx context.Context) error {
	if m.cfg.StaticPods == nil {
		return fmt.Errorf("%w: StaticPods is required by Run", ErrInvalidConfig)
	}
	if err := m.once.Start(); err != nil {
		return err
	}
	t := m.cfg.Clock.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		// Readiness first: the pods read after it include every set that
		// made the sources ready.
		ready := m.cfg.SourcesReady == nil || m.cfg.SourcesReady()
		if err := m.sync(ctx, m.cfg.StaticPods(), ready); err != nil && ctx.Err() == nil {
			m.log.Info("mirror pod sync failed", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}
