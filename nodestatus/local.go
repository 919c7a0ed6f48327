package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

// LocalConfig configures a Local sink.
type LocalConfig struct {
	// Dir, if set, receives the node as JSON in a checkpoint file
	// (internal/checkpoint framing: atomic, checksummed) after every
	// change; read it back with ReadLocal.
	Dir string
	// Name is the file name in Dir; "" = "node.json".
	Name string
	// OnUpdate, if set, gets a copy of the node after every change.
	OnUpdate func(node *v1.Node)
}

// Local is a NodeSink for an agent without a cluster: it keeps the node in
// memory and hands every change to a file and/or a callback.
type Local struct {
	cfg LocalConfig

	mu   sync.Mutex
	node *v1.Node
}

var _ NodeSink = (*Local)(nil)

// NewLocal validates cfg. It does no I/O.
func NewLocal(cfg LocalConfig) (*Local, error) {
	if cfg.Name == "" {
		cfg.Name = "node.json"
	}
	if err := checkpoint.ValidateName(cfg.Name); err != nil {
		return nil, fmt.Errorf("%w: Name: %w", ErrInvalidConfig, err)
	}
	return &Local{cfg: cfg}, nil
}

// Register implements NodeSink: the first call stores node; later calls
// keep the stored status and take the new labels and taints.
func (l *Local) Register(ctx context.Context, node *v1.Node) (*v1.Node, error) {
	if node == nil {
		return nil, fmt.Errorf("%w: nil node", ErrRegister)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	next := node.DeepCopy()
	if l.node != nil {
		next = l.node.DeepCopy()
		next.Labels = node.DeepCopy().Labels
		next.Spec.Taints = node.DeepCopy().Spec.Taints
	}
	if err := l.storeLocked(next); err != nil {
		return nil, err
	}
	return next.DeepCopy(), nil
}

// Get implements NodeSink.
func (l *Local) Get(ctx context.Context, fresh bool) (*v1.Node, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil {
		return nil, ErrNotRegistered
	}
	return l.node.DeepCopy(), nil
}

// PatchStatus implements NodeSink: it stores node's status and labels.
func (l *Local) PatchStatus(ctx context.Context, original, node *v1.Node) (*v1.Node, error) {
	if node == nil {
		return nil, fmt.Errorf("nodestatus: nil node")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil {
		return nil, ErrNotRegistered
	}
	next := l.node.DeepCopy()
	next.Status = *node.Status.DeepCopy()
	next.Labels = node.DeepCopy().Labels
	if err := l.storeLocked(next); err != nil {
		return nil, err
	}
	return next.DeepCopy(), nil
}

// Node returns a copy of the stored node, nil before registration.
func (l *Local) Node() *v1.Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.node == nil {
		return nil
	}
	return l.node.DeepCopy()
}

func (l *Local) storeLocked(node *v1.Node) error {
	if l.cfg.Dir != "" {
		b, err := json.Marshal(node)
		if err != nil {
			return fmt.Errorf("nodestatus: encoding node: %w", err)
		}
		if err := checkpoint.Write(l.cfg.Dir, l.cfg.Name, b); err != nil {
			return fmt.Errorf("nodestatus: writing node file: %w", err)
		}
	}
	l.node = node
	if l.cfg.OnUpdate != nil {
		l.cfg.OnUpdate(node.DeepCopy())
	}
	return nil
}

// ReadLocal reads a node written by a Local sink with LocalConfig.Dir
// (name "" = "node.json").
func ReadLocal(dir, name string) (*v1.Node, error) {
	if name == "" {
		name = "node.json"
	}
	b, err := checkpoint.Read(dir, name)
	if err != nil {
		return nil, err
	}
	node := &v1.Node{}
	if err := json.Unmarshal(b, node); err != nil {
		return nil, fmt.Errorf("nodestatus: decoding node file: %w", err)
	}
	return node, nil
}
