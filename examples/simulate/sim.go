package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	evapiserver "github.com/nodekit/nodekit/events/apiserver"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/nodestatus"
	pcapiserver "github.com/nodekit/nodekit/podconfig/apiserver"
	"github.com/nodekit/nodekit/prober"
)

// simConfig is what the simulator runs.
type simConfig struct {
	Names []string
	Specs func(name string) nodeSpec
	// Root holds a directory per node.
	Root   string
	Images []string

	LeaseDurationSeconds  int32
	LeaseRenewInterval    time.Duration
	StatusUpdateFrequency time.Duration
	StatusReportFrequency time.Duration
	// StartRate is how many nodes start per second (0: all at once).
	StartRate float64
	Events    bool
	// EventedPLEG follows the fake runtime's container events (relisting
	// every 300 s) instead of relisting every second.
	EventedPLEG bool
	NoEviction  bool

	Clients clients
	Log     *zap.Logger
	// NodeLog is given to every agent (zap.NewNop() keeps them quiet).
	NodeLog *zap.Logger
}

// Node states.
const (
	stateStarting = "starting"
	stateRunning  = "running"
	stateStopped  = "stopped"
	stateKilled   = "killed"
	stateFailed   = "failed"
)

// simNode is one simulated node.
type simNode struct {
	name  string
	index int
	spec  nodeSpec

	mu     sync.Mutex
	state  string
	err    error
	rt     *fake.Runtime // kept across a stop, dropped by a kill
	bootID string
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
	agent  *nodekit.Agent
	starts int
}

// simulator runs many agents in one process, each a complete nodekit
// agent on its own fake runtime, sharing one API client (connection pool
// and overall rate limit) and one watch of the pods of every node.
type simulator struct {
	cfg    simConfig
	shared *pcapiserver.Shared
	nodes  map[string]*simNode
	order  []*simNode
	nodeWG sync.WaitGroup
	// ctx is Run's; nodes started later run under it.
	ctxMu sync.Mutex
	ctx   context.Context
}

func newSimulator(cfg simConfig) (*simulator, error) {
	var errs []error
	if len(cfg.Names) == 0 {
		errs = append(errs, errors.New("no nodes"))
	}
	if cfg.Clients == nil {
		errs = append(errs, errors.New("no API clients"))
	}
	if cfg.Root == "" {
		errs = append(errs, errors.New("no root directory"))
	}
	if len(cfg.Names) > maxNodes {
		errs = append(errs, fmt.Errorf("%d nodes, at most %d", len(cfg.Names), maxNodes))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.NodeLog == nil {
		cfg.NodeLog = zap.NewNop()
	}
	if cfg.Specs == nil {
		cfg.Specs = func(string) nodeSpec { return defaultSpec() }
	}
	shared, err := pcapiserver.NewShared(pcapiserver.SharedConfig{Client: cfg.Clients.Shared(),
		MaxRetryBackoff: 5 * time.Second, Logger: cfg.Log})
	if err != nil {
		return nil, err
	}
	s := &simulator{cfg: cfg, shared: shared, nodes: map[string]*simNode{}}
	for i, name := range cfg.Names {
		n := &simNode{name: name, index: i, spec: cfg.Specs(name), state: stateStopped}
		s.nodes[name] = n
		s.order = append(s.order, n)
	}
	return s, nil
}

// maxNodes: node i gets the pod CIDR 10.(64+i/256).(i%256).0/24 and the
// address 127.(64+i/65536).(i/256%256).(i%256).
const maxNodes = 64 * 256

func defaultSpec() nodeSpec {
	return nodeSpec{
		CPU:              resource.MustParse("4"),
		Memory:           resource.MustParse("16Gi"),
		EphemeralStorage: resource.MustParse("100Gi"),
		Pods:             110,
	}
}

// Run starts the shared pod watch and every node (StartRate per second),
// and stops them all when ctx ends. It returns after every agent stopped.
func (s *simulator) Run(ctx context.Context) error {
	s.ctxMu.Lock()
	s.ctx = ctx
	s.ctxMu.Unlock()
	watchDone := make(chan error, 1)
	go func() { watchDone <- s.shared.Run(ctx) }()
	var every time.Duration
	if s.cfg.StartRate > 0 {
		every = time.Duration(float64(time.Second) / s.cfg.StartRate)
	}
	next := time.Now()
	for _, n := range s.order {
		if every > 0 {
			if wait := time.Until(next); wait > 0 {
				select {
				case <-time.After(wait):
				case <-ctx.Done():
				}
			}
			next = next.Add(every)
		}
		if ctx.Err() != nil {
			break
		}
		if err := s.start(n); err != nil {
			s.cfg.Log.Warn("node did not start", zap.String("node", n.name), zap.Error(err))
		}
	}
	<-ctx.Done()
	s.nodeWG.Wait()
	return <-watchDone
}

// start builds and runs the node's agent (a new fake runtime after a kill
// or at first start; the old one, with its pods, after a stop).
func (s *simulator) start(n *simNode) error {
	s.ctxMu.Lock()
	parent := s.ctx
	s.ctxMu.Unlock()
	if parent == nil || parent.Err() != nil {
		return errors.New("the simulator is not running")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.state == stateRunning || n.state == stateStarting {
		return fmt.Errorf("node %s is %s", n.name, n.state)
	}
	if n.rt == nil {
		rt, err := fake.New(fake.Config{Images: s.cfg.Images, MaxCalls: 2, PodCIDR: podCIDR(n.index),
			RuntimeName: "nodekit-simulate", RuntimeVersion: "0.1.0"})
		if err != nil {
			return err
		}
		n.rt = rt
		n.bootID = newID()
	}
	if n.client == nil {
		c, err := s.cfg.Clients.ForNode()
		if err != nil {
			return err
		}
		n.client = c
	}
	agent, err := s.build(n)
	if err != nil {
		n.state, n.err = stateFailed, err
		return err
	}
	ctx, cancel := context.WithCancel(parent)
	n.agent, n.cancel, n.done = agent, cancel, make(chan struct{})
	n.state, n.err = stateRunning, nil
	n.starts++
	done := n.done
	s.nodeWG.Add(1)
	go func() {
		defer s.nodeWG.Done()
		defer close(done)
		err := agent.Run(ctx)
		n.mu.Lock()
		defer n.mu.Unlock()
		if err != nil && n.state == stateRunning {
			n.state, n.err = stateFailed, err
			s.cfg.Log.Warn("node agent failed", zap.String("node", n.name), zap.Error(err))
		}
	}()
	return nil
}

// stop stops the node's agent and waits for it. kill also drops its
// runtime (the machine lost power: its pods are gone; the next start is
// a reboot with a new boot ID); a stop keeps it (the agent restarts and
// finds its pods running, as a restarted kubelet does).
func (s *simulator) stop(n *simNode, kill bool) error {
	n.mu.Lock()
	if n.state != stateRunning {
		st := n.state
		if kill && st == stateStopped {
			n.rt, n.state = nil, stateKilled
		}
		n.mu.Unlock()
		if kill && st == stateStopped {
			return nil
		}
		return fmt.Errorf("node %s is %s", n.name, st)
	}
	cancel, done := n.cancel, n.done
	n.state = stateStopped
	if kill {
		n.state = stateKilled
	}
	n.mu.Unlock()
	cancel()
	<-done
	n.mu.Lock()
	defer n.mu.Unlock()
	n.agent = nil
	if kill {
		n.rt = nil
	}
	return nil
}

// build wires one node's agent.
func (s *simulator) build(n *simNode) (*nodekit.Agent, error) {
	log := s.cfg.NodeLog.With(zap.String("node", n.name))
	spec := n.spec
	allocatable := v1.ResourceList{
		v1.ResourceCPU:              spec.CPU,
		v1.ResourceMemory:           spec.Memory,
		v1.ResourceEphemeralStorage: spec.EphemeralStorage,
		v1.ResourcePods:             *resource.NewQuantity(int64(spec.Pods), resource.DecimalSI),
	}
	probes := &simProbes{rt: n.rt, clock: clock.RealClock{}}
	b := nodekit.NewBuilder().WithRuntime(n.rt).WithRootDir(filepath.Join(s.cfg.Root, n.name)).WithLogger(log).
		WithNodeAllocatable(func() v1.ResourceList { return allocatable }).
		WithProber(func(c *prober.Config) { c.HTTPProber, c.TCPProber, c.GRPCProber = probes, probes, probes })
	if s.cfg.EventedPLEG {
		b.WithEventedPLEG()
	}
	if !s.cfg.NoEviction {
		b.WithEviction(eviction.Config{
			Thresholds: eviction.DefaultThresholds(),
			Stats:      &fakeStats{rt: n.rt, memory: uint64(spec.Memory.Value()), storage: uint64(spec.EphemeralStorage.Value())},
		})
	}
	name, bootID := n.name, n.bootID
	machine := func(context.Context) (*nodestatus.Machine, error) {
		return &nodestatus.Machine{
			NumCores:         int((spec.CPU.MilliValue() + 999) / 1000),
			MemoryCapacity:   spec.Memory.Value(),
			EphemeralStorage: spec.EphemeralStorage.Value(),
			MachineID:        machineID(name),
			SystemUUID:       machineID(name),
			BootID:           bootID,
			KernelVersion:    "simulated",
			OSImage:          "nodekit simulated node",
		}, nil
	}
	shared := s.shared
	return clusterapiserver.Wire(b, clusterapiserver.Config{
		Client:                n.client,
		NodeName:              name,
		Labels:                spec.Labels,
		Taints:                spec.Taints,
		NodeIPs:               []net.IP{nodeIP(n.index)},
		AllowLoopbackNodeIP:   true,
		Machine:               machine,
		MaxPods:               spec.Pods,
		StatusUpdateFrequency: s.cfg.StatusUpdateFrequency,
		StatusReportFrequency: s.cfg.StatusReportFrequency,
		LeaseDurationSeconds:  s.cfg.LeaseDurationSeconds,
		LeaseRenewInterval:    s.cfg.LeaseRenewInterval,
		NoMirrorPods:          true,
		NoEvents:              !s.cfg.Events,
		Events:                evapiserver.Config{Client: s.cfg.Clients.Events()},
		// One watch of every node's pods instead of one per node.
		WrapPodSource: func(nodekit.PodSourceFunc) nodekit.PodSourceFunc {
			return func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return shared.Source(name, out)
			}
		},
		Logger: log,
	}).Build()
}

// match returns the nodes whose names match glob (path.Match), in order.
func (s *simulator) match(glob string) ([]*simNode, error) {
	if _, err := path.Match(glob, ""); err != nil {
		return nil, fmt.Errorf("%q: %w", glob, err)
	}
	var out []*simNode
	for _, n := range s.order {
		if ok, _ := path.Match(glob, n.name); ok {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no node matches %q", glob)
	}
	return out, nil
}

// act applies "start", "stop", "kill" or "restart" to the nodes matching
// glob and returns the names it acted on.
func (s *simulator) act(action, glob string) ([]string, error) {
	nodes, err := s.match(glob)
	if err != nil {
		return nil, err
	}
	var do func(n *simNode) error
	switch action {
	case "start":
		do = s.start
	case "stop":
		do = func(n *simNode) error { return s.stop(n, false) }
	case "kill":
		do = func(n *simNode) error { return s.stop(n, true) }
	case "restart":
		do = func(n *simNode) error {
			_ = s.stop(n, false) // a node that does not run just starts
			return s.start(n)
		}
	default:
		return nil, fmt.Errorf("unknown action %q: want start, stop, kill or restart", action)
	}
	// In parallel: stopping an agent waits for its parts to return.
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = do(n) })
	}
	wg.Wait()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.name)
	}
	return names, errors.Join(errs...)
}

// nodeState is one line of the node list.
type nodeState struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Starts int    `json:"starts"`
	Pods   int    `json:"pods"`
	Error  string `json:"error,omitempty"`
}

func (s *simulator) states() []nodeState {
	out := make([]nodeState, 0, len(s.order))
	for _, n := range s.order {
		n.mu.Lock()
		st := nodeState{Name: n.name, State: n.state, Starts: n.starts}
		if n.err != nil {
			st.Error = n.err.Error()
		}
		if n.agent != nil {
			st.Pods = len(n.agent.Pods())
		}
		n.mu.Unlock()
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// running counts the nodes whose agent runs.
func (s *simulator) running() int {
	k := 0
	for _, n := range s.order {
		n.mu.Lock()
		if n.state == stateRunning {
			k++
		}
		n.mu.Unlock()
	}
	return k
}

func podCIDR(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 64+i/256, i%256) }

func nodeIP(i int) net.IP { return net.IPv4(127, byte(64+i/65536), byte(i/256%256), byte(i%256)) }

// machineID is a stable ID per node name.
func machineID(name string) string {
	h := fnv64(name)
	return fmt.Sprintf("%016x%016x", h, fnv64(name+"/uuid"))
}

func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Sprint(time.Now().UnixNano())
	}
	return hex.EncodeToString(b)
}
