package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodekit/nodekit/nodestatus"
)

// SinkConfig configures a Sink.
type SinkConfig struct {
	// Client talks to the API server with the node's credential (required).
	Client kubernetes.Interface
	// NodeName is the node's name (required).
	NodeName string
	Logger   *zap.Logger
}

// Sink is the nodestatus.NodeSink of a Kubernetes API server. It keeps the
// node as last read or written as its cache: the first try of an update
// works on it, later tries read the node again.
type Sink struct {
	cfg SinkConfig
	log *zap.Logger

	mu     sync.Mutex
	cached *v1.Node
}

var _ nodestatus.NodeSink = (*Sink)(nil)

// NewSink validates cfg. It does no I/O.
func NewSink(cfg SinkConfig) (*Sink, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, fmt.Errorf("%w: Client is required", ErrInvalidConfig))
	}
	if cfg.NodeName == "" {
		errs = append(errs, fmt.Errorf("%w: NodeName is required", ErrInvalidConfig))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Sink{cfg: cfg, log: cfg.Logger.Named("nodestatus.apiserver").With(zap.String("node", cfg.NodeName))}, nil
}

// defaultLabels are the labels the agent owns on an existing node.
func defaultLabels() []string {
	return []string{
		v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyRegion,
		v1.LabelFailureDomainBetaZone, v1.LabelFailureDomainBetaRegion,
		v1.LabelInstanceTypeStable, v1.LabelInstanceType,
		v1.LabelOSStable, v1.LabelArchStable, v1.LabelWindowsBuild,
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	}
}

// Register implements nodestatus.NodeSink: it creates the node; if it
// exists already (or creating is forbidden but the node may exist) it reads
// it and reconciles what the agent owns: the default labels the initial
// node carries, missing capacity and allocatable, and huge page sizes (added,
// resized, removed). Taints are not reconciled: they are set at creation
// only, as the kubelet does (and NodeRestriction forbids a node to change
// them).
func (s *Sink) Register(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	if node == nil || node.Name != s.cfg.NodeName {
		return nil, fmt.Errorf("%w: want %q", ErrWrongNode, s.cfg.NodeName)
	}
	nodes := s.cfg.Client.CoreV1().Nodes()
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		s.setCache(created)
		return created.DeepCopy(), nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("creating node: %w", err)
	}
	existing, getErr := nodes.Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
	if getErr != nil {
		if apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("creating node: %w (and reading it: %w)", err, getErr)
		}
		return nil, fmt.Errorf("reading existing node: %w", getErr)
	}
	original := existing.DeepCopy()
	if !reconcile(node, existing) {
		s.log.Info("node was registered before")
		s.setCache(existing)
		return existing.DeepCopy(), nil
	}
	s.log.Info("node was registered before; reconciling labels and resources")
	updated, err := s.patch(ctx, original, existing)
	if err != nil {
		return nil, fmt.Errorf("reconciling existing node: %w", err)
	}
	return updated, nil
}

// reconcile updates existing from the agent's initial node and reports
// whether anything changed.
func reconcile(initial, existing *v1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, k := range defaultLabels() {
		want, ok := initial.Labels[k]
		if !ok {
			continue
		}
		if existing.Labels[k] != want {
			existing.Labels[k] = want
			changed = true
		}
		if existing.Labels[k] == "" {
			delete(existing.Labels, k)
		}
	}
	if existing.Status.Capacity == nil {
		if initial.Status.Capacity != nil {
			existing.Status.Capacity = initial.Status.Capacity.DeepCopy()
			changed = true
		} else {
			existing.Status.Capacity = v1.ResourceList{}
		}
	}
	if existing.Status.Allocatable == nil {
		if initial.Status.Allocatable != nil {
			existing.Status.Allocatable = initial.Status.Allocatable.DeepCopy()
			changed = true
		} else {
			existing.Status.Allocatable = v1.ResourceList{}
		}
	}
	isHuge := func(n v1.ResourceName) bool { return strings.HasPrefix(string(n), v1.ResourceHugePagesPrefix) }
	for name, c := range initial.Status.Capacity {
		if !isHuge(name) {
			continue
		}
		old, ok := existing.Status.Capacity[name]
		if !ok || old.Cmp(c) != 0 {
			existing.Status.Capacity[name] = c.DeepCopy()
			changed = true
		}
		a := initial.Status.Allocatable[name]
		if oldA, ok2 := existing.Status.Allocatable[name]; !ok || !ok2 || oldA.Cmp(a) != 0 {
			existing.Status.Allocatable[name] = a.DeepCopy()
			changed = true
		}
	}
	for name := range existing.Status.Capacity {
		if _, ok := initial.Status.Capacity[name]; isHuge(name) && !ok {
			delete(existing.Status.Capacity, name)
			delete(existing.Status.Allocatable, name)
			changed = true
		}
	}
	return changed
}

// Get implements nodestatus.NodeSink.
func (s *Sink) Get(ctx context.Context, fresh bool) (*v1.Node, error) {
	if !fresh {
		s.mu.Lock()
		cached := s.cached
		s.mu.Unlock()
		if cached != nil {
			return cached.DeepCopy(), nil
		}
	}
	node, err := s.cfg.Client.CoreV1().Nodes().Get(ctx, s.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	s.setCache(node)
	return node.DeepCopy(), nil
}

// PatchStatus implements nodestatus.NodeSink: a strategic merge patch of
// the status subresource from original to node (status and metadata; the
// spec is never sent).
func (s *Sink) PatchStatus(ctx context.Context, original, node *v1.Node) (*v1.Node, error) {
	if original == nil || node == nil || node.Name != s.cfg.NodeName {
		return nil, fmt.Errorf("%w: want %q", ErrWrongNode, s.cfg.NodeName)
	}
	return s.patch(ctx, original, node)
}

func (s *Sink) patch(ctx context.Context, original, node *v1.Node) (*v1.Node, error) {
	data, err := StatusPatch(original, node)
	if err != nil {
		return nil, err
	}
	updated, err := s.cfg.Client.CoreV1().Nodes().Patch(ctx, s.cfg.NodeName, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status")
	if err != nil {
		s.invalidate()
		return nil, fmt.Errorf("patching node status: %w", err)
	}
	s.setCache(updated)
	return updated.DeepCopy(), nil
}

func (s *Sink) setCache(node *v1.Node) {
	s.mu.Lock()
	s.cached = node.DeepCopy()
	s.mu.Unlock()
}

func (s *Sink) invalidate() {
	s.mu.Lock()
	s.cached = nil
	s.mu.Unlock()
}

// StatusPatch is the strategic merge patch that takes original to node,
// leaving the spec alone. Addresses are sent as a whole list (their merge
// key, the type, is not unique: two InternalIPs would merge wrongly).
func StatusPatch(original, node *v1.Node) ([]byte, error) {
	if original == nil || node == nil {
		return nil, fmt.Errorf("%w: nil node", ErrWrongNode)
	}
	if patch, ok := heartbeatPatch(original, node); ok {
		return patch, nil
	}
	return diffStatusPatch(original, node)
}

// diffStatusPatch computes StatusPatch by diffing the JSON of both nodes.
func diffStatusPatch(original, node *v1.Node) ([]byte, error) {
	oldData, err := json.Marshal(original)
	if err != nil {
		return nil, fmt.Errorf("encoding original node: %w", err)
	}
	diff := node.DeepCopy()
	diff.Spec = original.Spec
	newData, err := json.Marshal(diff)
	if err != nil {
		return nil, fmt.Errorf("encoding node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("creating node status patch: %w", err)
	}
	if len(original.Status.Addresses) == 0 || equality.Semantic.DeepEqual(original.Status.Addresses, node.Status.Addresses) {
		return patch, nil
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, fmt.Errorf("decoding node status patch: %w", err)
	}
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	list := []any{map[string]any{"$patch": "replace"}}
	for _, a := range node.Status.Addresses {
		list = append(list, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	status["addresses"] = list
	return json.Marshal(m)
}

// heartbeatPatch builds the patch for the most common status update
// directly: only the conditions' heartbeat times moved. It reports false
// (and the caller diffs the two nodes) for anything else: different
// condition types or order, duplicate types, any other condition field
// changed, a heartbeat cleared, or any difference (reflect.DeepEqual, so
// even an equivalent but differently represented value) in the metadata
// or the rest of the status. The spec is ignored, as in the diff. The bytes
// are those the diff yields: the list order under its
// $setElementOrder directive, then the moved heartbeats keyed by type.
func heartbeatPatch(original, node *v1.Node) ([]byte, bool) {
	oc, nc := original.Status.Conditions, node.Status.Conditions
	if len(oc) == 0 || len(oc) != len(nc) {
		return nil, false
	}
	moved := 0
	var beats [][]byte // the new heartbeat's JSON per condition, nil if unmoved
	for i := range nc {
		o, n := &oc[i], &nc[i]
		if o.Type != n.Type || o.Status != n.Status || o.Reason != n.Reason || o.Message != n.Message ||
			!reflect.DeepEqual(o.LastTransitionTime, n.LastTransitionTime) {
			return nil, false
		}
		for j := range i {
			if nc[j].Type == n.Type {
				return nil, false
			}
		}
		if n.LastHeartbeatTime.IsZero() {
			return nil, false
		}
		ob, err1 := o.LastHeartbeatTime.MarshalJSON()
		nb, err2 := n.LastHeartbeatTime.MarshalJSON()
		if err1 != nil || err2 != nil {
			return nil, false
		}
		if string(ob) == string(nb) {
			continue // equal once encoded (second precision): not in the diff
		}
		if beats == nil {
			beats = make([][]byte, len(nc))
		}
		beats[i] = nb
		moved++
	}
	if moved == 0 {
		return nil, false
	}
	if original.TypeMeta != node.TypeMeta || !reflect.DeepEqual(original.ObjectMeta, node.ObjectMeta) {
		return nil, false
	}
	os, ns := original.Status, node.Status // shallow copies
	os.Conditions, ns.Conditions = nil, nil
	if !reflect.DeepEqual(os, ns) {
		return nil, false
	}
	keys := make([][]byte, len(nc))
	size := 64
	for i := range nc {
		t, err := json.Marshal(string(nc[i].Type))
		if err != nil {
			return nil, false
		}
		keys[i] = t
		size += 2*len(t) + 20
		if beats[i] != nil {
			size += len(beats[i]) + 30
		}
	}
	b := make([]byte, 0, size)
	b = append(b, `{"status":{"$setElementOrder/conditions":[`...)
	for i, t := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = append(b, t...)
		b = append(b, '}')
	}
	b = append(b, `],"conditions":[`...)
	first := true
	for i, t := range keys {
		if beats[i] == nil {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, `{"lastHeartbeatTime":`...)
		b = append(b, beats[i]...)
		b = append(b, `,"type":`...)
		b = append(b, t...)
		b = append(b, '}')
	}
	b = append(b, "]}}"...)
	return b, true
}
