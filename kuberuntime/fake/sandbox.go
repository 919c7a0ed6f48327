package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type sandbox struct {
	id          string
	config      *runtimeapi.PodSandboxConfig // private copy of what the fake reads (sandboxConfig)
	meta        *runtimeapi.PodSandboxMetadata
	handler     string
	state       runtimeapi.PodSandboxState
	createdAt   int64
	hostNetwork bool
	ip          netip.Addr // zero for host network
	containers  []*container
}

func newID() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Runtime) allocIPLocked() (netip.Addr, bool) {
	size := 1 << min(r.podPrefix.Addr().BitLen()-r.podPrefix.Bits(), 20)
	a := r.nextIP
	for range size {
		if !r.podPrefix.Contains(a) {
			a = r.podPrefix.Addr().Next().Next()
		}
		if !r.usedIPs[a] && r.podPrefix.Contains(a.Next()) { // skip the last (broadcast) address
			r.usedIPs[a] = true
			r.nextIP = a.Next()
			return a, true
		}
		a = a.Next()
	}
	return netip.Addr{}, false
}

// lookupSandboxLocked finds a sandbox by id or unique id prefix.
func (r *Runtime) lookupSandboxLocked(id string) *sandbox {
	if sb, ok := r.sandboxes[id]; ok {
		return sb
	}
	if id == "" {
		return nil
	}
	var found *sandbox
	for _, sb := range r.sandboxOrder {
		if strings.HasPrefix(sb.id, id) {
			if found != nil {
				return nil
			}
			found = sb
		}
	}
	return found
}

// RunPodSandbox creates a ready sandbox. Pods that don't use the host
// network get an IP from Config.PodCIDR, and fail while the network is not ready.
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if err := r.begin(ctx, "RunPodSandbox", "", config.GetMetadata().GetName(), 0); err != nil {
		return "", err
	}
	md := config.GetMetadata()
	if md == nil || md.Name == "" {
		return "", coded(codes.InvalidArgument, ErrInvalidArgument, "RunPodSandbox: sandbox config must have metadata with a name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.handlers != nil && !r.handlers[runtimeHandler] {
		return "", coded(codes.NotFound, ErrNotFound, "no runtime for %q is configured", runtimeHandler)
	}
	for _, sb := range r.sandboxOrder {
		m := sb.meta
		if m.Name == md.Name && m.Namespace == md.Namespace && m.Uid == md.Uid && m.Attempt == md.Attempt {
			return "", coded(codes.AlreadyExists, ErrAlreadyExists, "sandbox name %s_%s_%s_%d is reserved for %q", md.Name, md.Namespace, md.Uid, md.Attempt, sb.id)
		}
	}
	sb := &sandbox{
		id:          newID(),
		config:      sandboxConfig(config),
		handler:     runtimeHandler,
		state:       runtimeapi.PodSandboxState_SANDBOX_READY,
		createdAt:   r.nowNano(),
		hostNetwork: config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
	}
	sb.meta = sb.config.Metadata
	if !sb.hostNetwork {
		if !r.networkReady {
			return "", coded(codes.Unknown, ErrFailedPrecondition, "failed to setup network for sandbox: network plugin not ready")
		}
		ip, ok := r.allocIPLocked()
		if !ok {
			return "", coded(codes.ResourceExhausted, ErrFailedPrecondition, "no free IP in %s", r.podPrefix)
		}
		sb.ip = ip
	}
	r.sandboxes[sb.id] = sb
	r.sandboxOrder = append(r.sandboxOrder, sb)
	r.publishLocked(sb.id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, sb.createdAt, sb)
	r.publishLocked(sb.id, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, sb.createdAt, sb)
	return sb.id, nil
}

// StopPodSandbox kills the sandbox's running containers at once (exit 137)
// and makes it NOTREADY. Stopping a stopped sandbox is not an error; an
// unknown id is NotFound.
func (r *Runtime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.begin(ctx, "StopPodSandbox", podSandboxID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.lookupSandboxLocked(podSandboxID)
	if sb == nil {
		return notFound("sandbox", podSandboxID)
	}
	r.stopSandboxLocked(sb, r.nowNano())
	return nil
}

func (r *Runtime) stopSandboxLocked(sb *sandbox, now int64) {
	for _, c := range sb.containers {
		r.advanceLocked(c, now)
		if c.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			r.finishLocked(c, now, 137, "Error", "")
		}
	}
	if sb.state == runtimeapi.PodSandboxState_SANDBOX_READY {
		sb.state = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		r.publishLocked(sb.id, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, now, sb)
	}
}

// RemovePodSandbox stops the sandbox if needed and removes it with all its
// containers. Removing an unknown sandbox is not an error.
func (r *Runtime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	if err := r.begin(ctx, "RemovePodSandbox", podSandboxID, "", 0); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.lookupSandboxLocked(podSandboxID)
	if sb == nil {
		return nil
	}
	now := r.nowNano()
	r.stopSandboxLocked(sb, now)
	for len(sb.containers) > 0 {
		r.removeContainerLocked(sb.containers[len(sb.containers)-1], now)
	}
	delete(r.sandboxes, sb.id)
	r.sandboxOrder = deleteElem(r.sandboxOrder, sb)
	if sb.ip.IsValid() {
		delete(r.usedIPs, sb.ip)
	}
	r.publishLocked(sb.id, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, now, sb)
	return nil
}

// deleteElem removes e from s; the vacated slot is zeroed (slices.Delete),
// so the backing array keeps no pointer to a removed sandbox or container.
func deleteElem[T comparable](s []T, e T) []T {
	for i, x := range s {
		if x == e {
			return slices.Delete(s, i, i+1)
		}
	}
	return s
}

// PodSandboxStatus returns the sandbox's status (with its network status
// and, as newer CRI runtimes do, the statuses of its containers).
func (r *Runtime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := r.begin(ctx, "PodSandboxStatus", podSandboxID, "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.lookupSandboxLocked(podSandboxID)
	if sb == nil {
		return nil, notFound("sandbox", podSandboxID)
	}
	now := r.nowNano()
	for _, c := range sb.containers {
		r.advanceLocked(c, now)
	}
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:             r.sandboxStatusLocked(sb),
		ContainersStatuses: r.containerStatusesLocked(sb),
		Timestamp:          now,
	}
	if verbose {
		resp.Info = map[string]string{"runtimeHandler": sb.handler}
	}
	return resp, nil
}

func (r *Runtime) sandboxStatusLocked(sb *sandbox) *runtimeapi.PodSandboxStatus {
	ip := r.hostIP
	if !sb.hostNetwork {
		ip = sb.ip.String()
	}
	return &runtimeapi.PodSandboxStatus{
		Id:        sb.id,
		Metadata:  sandboxMeta(sb.meta),
		State:     sb.state,
		CreatedAt: sb.createdAt,
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: cloneNamespaceOption(nsOptions(sb.config)),
		}},
		Labels:         maps.Clone(sb.config.Labels),
		Annotations:    maps.Clone(sb.config.Annotations),
		RuntimeHandler: sb.handler,
	}
}

func nsOptions(c *runtimeapi.PodSandboxConfig) *runtimeapi.NamespaceOption {
	if o := c.GetLinux().GetSecurityContext().GetNamespaceOptions(); o != nil {
		return o
	}
	return &runtimeapi.NamespaceOption{}
}

func sandboxMeta(m *runtimeapi.PodSandboxMetadata) *runtimeapi.PodSandboxMetadata {
	return &runtimeapi.PodSandboxMetadata{Name: m.Name, Uid: m.Uid, Namespace: m.Namespace, Attempt: m.Attempt}
}

func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListPodSandbox lists sandboxes, oldest first, filtered by id (or unique
// id prefix), state and label selector.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := r.begin(ctx, "ListPodSandbox", filter.GetId(), "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	candidates := r.sandboxOrder
	if id := filter.GetId(); id != "" {
		sb := r.lookupSandboxLocked(id)
		if sb == nil {
			return []*runtimeapi.PodSandbox{}, nil
		}
		candidates = []*sandbox{sb}
	}
	out := make([]*runtimeapi.PodSandbox, 0, len(candidates))
	for _, sb := range candidates {
		if st := filter.GetState(); st != nil && st.State != sb.state {
			continue
		}
		if !labelsMatch(sb.config.Labels, filter.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             sb.id,
			Metadata:       sandboxMeta(sb.meta),
			State:          sb.state,
			CreatedAt:      sb.createdAt,
			Labels:         maps.Clone(sb.config.Labels),
			Annotations:    maps.Clone(sb.config.Annotations),
			RuntimeHandler: sb.handler,
		})
	}
	return out, nil
}

// UpdatePodSandboxResources accepts the update (the fake has no pod cgroups).
func (r *Runtime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	if err := r.begin(ctx, "UpdatePodSandboxResources", req.GetPodSandboxId(), "", 0); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lookupSandboxLocked(req.GetPodSandboxId()) == nil {
		return nil, notFound("sandbox", req.GetPodSandboxId())
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
