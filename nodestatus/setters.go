package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// Setter fills in part of a node's status. Setters run in order on a copy
// of the node; a failing setter leaves its part as it was (or as documented)
// and the rest still run.
type Setter func(ctx context.Context, node *v1.Node) error

// Defaults the kubelet uses.
const (
	// DefaultMaxPods is the pods capacity when nothing else limits it.
	DefaultMaxPods = 110
	// DefaultMaxImages is how many images the status lists (-1 = all).
	DefaultMaxImages = 50
	// MaxNamesPerImage is how many names (digests, then tags) one listed
	// image carries.
	MaxNamesPerImage = 5
	// KubernetesVersion is the Kubernetes release whose kubelet nodekit
	// follows.
	KubernetesVersion = "v1.36.3"
	// DefaultAgentVersion is the NodeInfo.KubeletVersion reported when the
	// caller gives none: KubernetesVersion with the semantic-version build
	// metadata "nodekit" (as k3s reports "+k3s1"), so that tools which parse
	// the kubelet version (version-skew checks, upgrade tools) read v1.36.3.
	DefaultAgentVersion = KubernetesVersion + "+nodekit"
)

// Condition reasons, as the kubelet reports them (consumers match on them).
const (
	ReasonReady                 = "KubeletReady"
	ReasonNotReady              = "KubeletNotReady"
	ReasonSufficientMemory      = "KubeletHasSufficientMemory"
	ReasonInsufficientMemory    = "KubeletHasInsufficientMemory"
	ReasonNoDiskPressure        = "KubeletHasNoDiskPressure"
	ReasonDiskPressure          = "KubeletHasDiskPressure"
	ReasonSufficientPID         = "KubeletHasSufficientPID"
	ReasonInsufficientPID       = "KubeletHasInsufficientPID"
	hugePagesResourcePrefix     = v1.ResourceHugePagesPrefix
	messageReady                = "node agent is posting ready status"
	messageSufficientMemory     = "node agent has sufficient memory available"
	messageInsufficientMemory   = "node agent has insufficient memory available"
	messageNoDiskPressure       = "node agent has no disk pressure"
	messageDiskPressure         = "node agent has disk pressure"
	messageSufficientPID        = "node agent has sufficient PID available"
	messageInsufficientPID      = "node agent has insufficient PID available"
	unknownRuntimeVersionString = "Unknown"
)

// AddressConfig configures NodeAddress.
type AddressConfig struct {
	// NodeIPs are the node's addresses, at most two (one per IP family).
	// An unspecified address (0.0.0.0, ::) only chooses the preferred family.
	NodeIPs []net.IP
	// Hostname is reported as the Hostname address; "" = the node's name.
	Hostname string
	// LookupIP resolves the node's name when no NodeIP is given and the
	// hostname is not an IP; nil = no lookup.
	LookupIP func(ctx context.Context, host string) ([]net.IP, error)
	// HostIPs lists candidate addresses of the host's interfaces, used when
	// nothing else gives one; nil = net.InterfaceAddrs.
	HostIPs func() ([]net.IP, error)
	// AllowLoopback accepts a loopback NodeIP (127.0.0.1, ::1), which the
	// kubelet refuses: for a single-host setup or a test where the API
	// server runs beside the agent and must reach its HTTPS API.
	AllowLoopback bool
}

// NodeAddress reports InternalIP address(es) and the Hostname: both given
// NodeIPs when there are two, else the first NodeIP, else the hostname if it
// is an IP, else the first usable address of the node name's lookup, else
// the first usable interface address, the preferred family (IPv4 unless the
// first NodeIP is "::") first. Loopback, link-local, multicast and
// unspecified addresses are never used.
func NodeAddress(cfg AddressConfig) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		var lookup func(host string) []net.IP
		if cfg.LookupIP != nil {
			lookup = func(host string) []net.IP {
				ips, err := cfg.LookupIP(ctx, host)
				if err != nil {
					return nil
				}
				return ips
			}
		}
		addrs, err := nodeAddresses(cfg, node.Name, lookup)
		if err != nil {
			return err
		}
		node.Status.Addresses = addrs
		return nil
	}
}

// StaticAddresses returns the addresses NodeAddress reports for the node
// named nodeName, worked out without cfg.LookupIP (no name lookup): for
// the node's IPs before its first status report, e.g. the pods' host IPs.
func StaticAddresses(cfg AddressConfig, nodeName string) ([]v1.NodeAddress, error) {
	return nodeAddresses(cfg, nodeName, nil)
}

// nodeAddresses is NodeAddress's choice of addresses; lookup (nil: none)
// resolves the node's name.
func nodeAddresses(cfg AddressConfig, nodeName string, lookup func(host string) []net.IP) ([]v1.NodeAddress, error) {
	var primary, secondary net.IP
	if len(cfg.NodeIPs) > 0 {
		primary = cfg.NodeIPs[0]
	}
	if len(cfg.NodeIPs) > 1 {
		secondary = cfg.NodeIPs[1]
	}
	specified := func(ip net.IP) bool { return ip != nil && !ip.IsUnspecified() }
	preferV4 := primary == nil || primary.To4() != nil
	hostIPs := cfg.HostIPs
	if hostIPs == nil {
		hostIPs = interfaceIPs
	}
	hostname := cfg.Hostname
	if hostname == "" {
		hostname = nodeName
	}
	for _, ip := range []net.IP{primary, secondary} {
		if specified(ip) && !usableIP(ip) && !(cfg.AllowLoopback && ip.IsLoopback()) {
			return nil, fmt.Errorf("%w: node IP %s is not a usable address", ErrNoAddress, ip)
		}
	}
	if specified(primary) && specified(secondary) {
		return []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: primary.String()},
			{Type: v1.NodeInternalIP, Address: secondary.String()},
			{Type: v1.NodeHostName, Address: hostname},
		}, nil
	}
	var ip net.IP
	switch {
	case specified(primary):
		ip = primary
	case net.ParseIP(hostname) != nil:
		ip = net.ParseIP(hostname)
	default:
		if lookup != nil {
			ip = pickIP(lookup(nodeName), preferV4)
		}
		if ip == nil {
			ips, err := hostIPs()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrNoAddress, err)
			}
			ip = pickIP(ips, preferV4)
		}
	}
	if ip == nil {
		return nil, fmt.Errorf("%w: can't find an address for node %q", ErrNoAddress, nodeName)
	}
	return []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: ip.String()},
		{Type: v1.NodeHostName, Address: hostname},
	}, nil
}

// HostIPs returns the host IPs of a node with the given addresses, as the
// kubelet picks them for its pods' status.hostIPs: the first InternalIP
// (else the first ExternalIP), then the first address of the other IP
// family, InternalIPs first. Unparsable addresses are skipped; no address
// gives nil.
func HostIPs(addrs []v1.NodeAddress) []string {
	var all []netip.Addr
	for _, t := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range addrs {
			if a.Type != t {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				all = append(all, ip.Unmap())
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	out := []string{all[0].String()}
	for _, ip := range all[1:] {
		if ip.Is4() != all[0].Is4() {
			out = append(out, ip.String())
			break
		}
	}
	return out
}

func usableIP(ip net.IP) bool {
	return ip.To16() != nil && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() &&
		!ip.IsMulticast() && !ip.IsUnspecified()
}

func pickIP(ips []net.IP, preferV4 bool) net.IP {
	var other net.IP
	for _, ip := range ips {
		if !usableIP(ip) {
			continue
		}
		if (ip.To4() != nil) == preferV4 {
			return ip
		}
		if other == nil {
			other = ip
		}
	}
	return other
}

func interfaceIPs() ([]net.IP, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	var out []net.IP
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP)
		}
	}
	return out, nil
}

// MachineInfoConfig configures MachineInfo.
type MachineInfoConfig struct {
	// Machine describes the host (required; MachineReader{}.Read for the
	// real one).
	Machine MachineFunc
	// MaxPods caps the pods capacity; 0 = DefaultMaxPods.
	MaxPods int
	// PodsPerCore, when > 0, makes the pods capacity
	// min(cores × PodsPerCore, MaxPods).
	PodsPerCore int
	// Reservation is what is held back from capacity (system and agent
	// reservations and hard eviction thresholds), typically the container
	// manager's node allocatable reservation; nil = nothing.
	Reservation func() v1.ResourceList
	// Devices reports the extended resources of device plugins (the
	// device manager; nil = none).
	Devices DeviceCapacity
}

// DeviceCapacity reports extended resources served by device plugins:
// capacity counts all devices of a resource, allocatable its healthy ones;
// a resource that went away is reported as 0. The device manager
// satisfies it.
type DeviceCapacity interface {
	DeviceCapacity() (capacity, allocatable v1.ResourceList)
}

// MachineInfo reports capacity and allocatable (cpu, memory, pods,
// ephemeral-storage, hugepages-<size>) and the machine, system and boot
// IDs. If the machine can't be read, cpu and memory capacity become 0 and
// pods MaxPods (so Ready turns false only if they are missing, as the
// kubelet does) and the error is returned. Allocatable is capacity minus the
// reservation, never below zero, and memory allocatable also loses every
// huge page capacity. Resources in allocatable but not in capacity are
// dropped. Device plugin resources (cfg.Devices) are added to capacity, and
// their allocatable is the device manager's (the healthy devices), as the
// kubelet does.
func MachineInfo(cfg MachineInfoConfig) Setter {
	maxPods := cfg.MaxPods
	if maxPods <= 0 {
		maxPods = DefaultMaxPods
	}
	return func(ctx context.Context, node *v1.Node) error {
		if node.Status.Capacity == nil {
			node.Status.Capacity = v1.ResourceList{}
		}
		var infoErr error
		var m *Machine
		if cfg.Machine == nil {
			infoErr = fmt.Errorf("%w: no machine source", ErrMachineInfo)
		} else if m, infoErr = cfg.Machine(ctx); infoErr == nil && m == nil {
			infoErr = fmt.Errorf("%w: empty machine description", ErrMachineInfo)
		}
		if infoErr != nil && !errors.Is(infoErr, ErrMachineInfo) {
			infoErr = fmt.Errorf("%w: %w", ErrMachineInfo, infoErr)
		}
		capacity := node.Status.Capacity
		if infoErr != nil {
			capacity[v1.ResourceCPU] = *resource.NewMilliQuantity(0, resource.DecimalSI)
			capacity[v1.ResourceMemory] = *resource.NewQuantity(0, resource.BinarySI)
			capacity[v1.ResourcePods] = *resource.NewQuantity(int64(maxPods), resource.DecimalSI)
		} else {
			node.Status.NodeInfo.MachineID = m.MachineID
			node.Status.NodeInfo.SystemUUID = m.SystemUUID
			node.Status.NodeInfo.BootID = m.BootID
			capacity[v1.ResourceCPU] = *resource.NewMilliQuantity(int64(m.NumCores)*1000, resource.DecimalSI)
			capacity[v1.ResourceMemory] = *resource.NewQuantity(m.MemoryCapacity, resource.BinarySI)
			pods := int64(maxPods)
			if cfg.PodsPerCore > 0 {
				pods = min(int64(m.NumCores)*int64(cfg.PodsPerCore), int64(maxPods))
			}
			capacity[v1.ResourcePods] = *resource.NewQuantity(pods, resource.DecimalSI)
			if m.EphemeralStorage > 0 {
				capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(m.EphemeralStorage, resource.BinarySI)
			}
			for name := range capacity {
				if strings.HasPrefix(string(name), hugePagesResourcePrefix) {
					delete(capacity, name)
				}
			}
			for size, count := range m.HugePages {
				capacity[HugePageResourceName(size)] = *resource.NewQuantity(size*count, resource.BinarySI)
			}
		}
		var devAlloc v1.ResourceList
		if cfg.Devices != nil {
			var devCap v1.ResourceList
			devCap, devAlloc = cfg.Devices.DeviceCapacity()
			for name, q := range devCap {
				capacity[name] = q
			}
		}
		setAllocatable(node, cfg.Reservation)
		for name, q := range devAlloc {
			if _, ok := capacity[name]; ok {
				node.Status.Allocatable[name] = q
			}
		}
		return infoErr
	}
}

// HugePageResourceName is the resource name of huge pages of a size in
// bytes, such as "hugepages-2Mi".
func HugePageResourceName(size int64) v1.ResourceName {
	return v1.ResourceName(hugePagesResourcePrefix + resource.NewQuantity(size, resource.BinarySI).String())
}

func setAllocatable(node *v1.Node, reservation func() v1.ResourceList) {
	if node.Status.Allocatable == nil {
		node.Status.Allocatable = v1.ResourceList{}
	}
	alloc := node.Status.Allocatable
	for name := range alloc {
		if _, ok := node.Status.Capacity[name]; !ok {
			delete(alloc, name)
		}
	}
	var reserved v1.ResourceList
	if reservation != nil {
		reserved = reservation()
	}
	for name, c := range node.Status.Capacity {
		v := c.DeepCopy()
		if r, ok := reserved[name]; ok {
			v.Sub(r)
		}
		if v.Sign() < 0 {
			v.Set(0)
		}
		alloc[name] = v
	}
	for name, c := range node.Status.Capacity {
		if !strings.HasPrefix(string(name), hugePagesResourcePrefix) {
			continue
		}
		mem, ok := alloc[v1.ResourceMemory]
		if !ok {
			continue
		}
		mem.Sub(c)
		if mem.Sign() < 0 {
			mem.Set(0)
		}
		alloc[v1.ResourceMemory] = mem
	}
}

// RuntimeVersioner is the CRI call VersionInfo makes (cri-api's
// RuntimeService has it).
type RuntimeVersioner interface {
	Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error)
}

// VersionInfo reports the kernel version and OS image of the machine, the
// container runtime as "<name>://<version>" (the version "Unknown" when the
// runtime does not answer, the name then the last one seen) and
// agentVersion ("" = DefaultAgentVersion) as the kubelet version. The
// deprecated kube-proxy version is cleared. A machine error is returned and
// leaves the node info as it was.
func VersionInfo(rt RuntimeVersioner, machine MachineFunc, agentVersion string) Setter {
	if agentVersion == "" {
		agentVersion = DefaultAgentVersion
	}
	var lastName string
	return func(ctx context.Context, node *v1.Node) error {
		if machine == nil {
			return fmt.Errorf("%w: no machine source", ErrMachineInfo)
		}
		m, err := machine(ctx)
		if err != nil {
			return err
		}
		if m == nil {
			return fmt.Errorf("%w: empty machine description", ErrMachineInfo)
		}
		node.Status.NodeInfo.KernelVersion = m.KernelVersion
		node.Status.NodeInfo.OSImage = m.OSImage
		name, version := lastName, unknownRuntimeVersionString
		if rt != nil {
			if resp, err := rt.Version(ctx, "v1"); err == nil && resp != nil {
				if resp.GetRuntimeName() != "" {
					name = resp.GetRuntimeName()
					lastName = name
				}
				if resp.GetRuntimeVersion() != "" {
					version = resp.GetRuntimeVersion()
				}
			}
		}
		if name == "" {
			name = "unknown"
		}
		node.Status.NodeInfo.ContainerRuntimeVersion = name + "://" + version
		node.Status.NodeInfo.KubeletVersion = agentVersion
		//lint:ignore SA1019 the kubelet clears the deprecated field on nodes that still carry it
		node.Status.NodeInfo.KubeProxyVersion = ""
		return nil
	}
}

// GoRuntime reports the operating system and architecture the agent runs on.
func GoRuntime() Setter {
	return func(ctx context.Context, node *v1.Node) error {
		node.Status.NodeInfo.OperatingSystem = runtime.GOOS
		node.Status.NodeInfo.Architecture = runtime.GOARCH
		return nil
	}
}

// DaemonEndpoints reports the port the agent serves its API on (0 = none).
func DaemonEndpoints(port int32) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		node.Status.DaemonEndpoints = v1.NodeDaemonEndpoints{KubeletEndpoint: v1.DaemonEndpoint{Port: port}}
		return nil
	}
}

// ImageLister is the CRI call Images makes (cri-api's ImageManagerService
// has it).
type ImageLister interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
}

// Images reports the node's images, largest first, at most maxImages of
// them (-1 = all, 0 = DefaultMaxImages), each with at most MaxNamesPerImage
// names (repo digests first, then tags). On a list error the image list
// becomes empty and the error is returned.
func Images(lister ImageLister, maxImages int) Setter {
	if maxImages == 0 {
		maxImages = DefaultMaxImages
	}
	return func(ctx context.Context, node *v1.Node) error {
		if lister == nil {
			node.Status.Images = nil
			return nil
		}
		imgs, err := lister.ListImages(ctx, nil)
		if err != nil {
			node.Status.Images = nil
			return fmt.Errorf("listing images: %w", err)
		}
		imgs = slices.Clone(imgs)
		slices.SortStableFunc(imgs, func(a, b *runtimeapi.Image) int {
			switch sa, sb := a.GetSize(), b.GetSize(); {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return 0
		})
		if maxImages > 0 && len(imgs) > maxImages {
			imgs = imgs[:maxImages]
		}
		var out []v1.ContainerImage
		for _, img := range imgs {
			if img == nil {
				continue
			}
			names := make([]string, 0, min(MaxNamesPerImage, len(img.GetRepoDigests())+len(img.GetRepoTags())))
			for _, n := range slices.Concat(img.GetRepoDigests(), img.GetRepoTags()) {
				if len(names) == MaxNamesPerImage {
					break
				}
				names = append(names, n)
			}
			out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(min(img.GetSize(), 1<<62))})
		}
		node.Status.Images = out
		return nil
	}
}

type pressureKind struct {
	typ                   v1.NodeConditionType
	under                 func(kubetypes.PressureSource) bool
	trueReason, trueMsg   string
	falseReason, falseMsg string
}

// MemoryPressureCondition maintains the MemoryPressure condition.
func MemoryPressureCondition(clk clock.PassiveClock, src kubetypes.PressureSource) Setter {
	return pressureCondition(clk, src, pressureKind{
		typ: v1.NodeMemoryPressure, under: kubetypes.PressureSource.IsUnderMemoryPressure,
		trueReason: ReasonInsufficientMemory, trueMsg: messageInsufficientMemory,
		falseReason: ReasonSufficientMemory, falseMsg: messageSufficientMemory,
	})
}

// DiskPressureCondition maintains the DiskPressure condition.
func DiskPressureCondition(clk clock.PassiveClock, src kubetypes.PressureSource) Setter {
	return pressureCondition(clk, src, pressureKind{
		typ: v1.NodeDiskPressure, under: kubetypes.PressureSource.IsUnderDiskPressure,
		trueReason: ReasonDiskPressure, trueMsg: messageDiskPressure,
		falseReason: ReasonNoDiskPressure, falseMsg: messageNoDiskPressure,
	})
}

// PIDPressureCondition maintains the PIDPressure condition.
func PIDPressureCondition(clk clock.PassiveClock, src kubetypes.PressureSource) Setter {
	return pressureCondition(clk, src, pressureKind{
		typ: v1.NodePIDPressure, under: kubetypes.PressureSource.IsUnderPIDPressure,
		trueReason: ReasonInsufficientPID, trueMsg: messageInsufficientPID,
		falseReason: ReasonSufficientPID, falseMsg: messageSufficientPID,
	})
}

// pressureCondition: the heartbeat moves on every call; status, reason,
// message and transition time change only when the pressure flips (a new
// condition starts Unknown, so it always "flips").
func pressureCondition(clk clock.PassiveClock, src kubetypes.PressureSource, k pressureKind) Setter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return func(ctx context.Context, node *v1.Node) error {
		now := metav1.NewTime(clk.Now())
		i := conditionIndex(node, k.typ)
		if i < 0 {
			node.Status.Conditions = append(node.Status.Conditions, v1.NodeCondition{Type: k.typ, Status: v1.ConditionUnknown})
			i = len(node.Status.Conditions) - 1
		}
		c := &node.Status.Conditions[i]
		c.LastHeartbeatTime = now
		under := src != nil && k.under(src)
		switch {
		case under && c.Status != v1.ConditionTrue:
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionTrue, k.trueReason, k.trueMsg, now
		case !under && c.Status != v1.ConditionFalse:
			c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionFalse, k.falseReason, k.falseMsg, now
		}
		return nil
	}
}

func conditionIndex(node *v1.Node, typ v1.NodeConditionType) int {
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == typ {
			return i
		}
	}
	return -1
}

// RuntimeReadyCheck adapts a runtime health report (the sync loop's
// RuntimeReady) to a ReadyCondition check: an error unless both the runtime
// and its network are ready.
func RuntimeReadyCheck(fn func() (runtimeReady, networkReady bool, err error)) func() error {
	return func() error {
		rt, nw, err := fn()
		if rt && nw {
			return nil
		}
		if err != nil {
			return err
		}
		var parts []string
		if !rt {
			parts = append(parts, "container runtime is not ready")
		}
		if !nw {
			parts = append(parts, "container runtime network is not ready")
		}
		return errors.New(strings.Join(parts, ", "))
	}
}

// PLEGCheck adapts a PLEG health report to a ReadyCondition check.
func PLEGCheck(fn func() (bool, error)) func() error {
	return func() error {
		ok, err := fn()
		if ok {
			return nil
		}
		if err == nil {
			err = errors.New("PLEG is not healthy")
		}
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
}

// ReadyCondition maintains the Ready condition; it must run after the
// setters that fill the capacity. The node is Ready (True, KubeletReady)
// unless a check returns an error or the capacity lacks cpu, memory or
// pods: then it is False, KubeletNotReady, with the errors as message. The
// heartbeat moves on every call, the transition time only when the status
// flips (or the condition is new).
func ReadyCondition(clk clock.PassiveClock, checks ...func() error) Setter {
	return ReadyConditionRequiring(clk, nil, checks...)
}

// ReadyConditionRequiring is ReadyCondition that also requires the capacity
// to hold the resources in required. The kubelet requires ephemeral-storage
// too while local storage capacity isolation is on (its default):
// SettersConfig.RequireEphemeralStorage.
func ReadyConditionRequiring(clk clock.PassiveClock, required []v1.ResourceName, checks ...func() error) Setter {
	if clk == nil {
		clk = clock.RealClock{}
	}
	need := append([]v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods}, required...)
	return func(ctx context.Context, node *v1.Node) error {
		now := metav1.NewTime(clk.Now())
		var msgs []string
		for _, check := range checks {
			if check == nil {
				continue
			}
			if err := check(); err != nil {
				msgs = append(msgs, err.Error())
			}
		}
		var missing []string
		for _, name := range need {
			if _, ok := node.Status.Capacity[name]; !ok && !slices.Contains(missing, string(name)) {
				missing = append(missing, string(name))
			}
		}
		if len(missing) > 0 {
			msgs = append(msgs, "missing node capacity for resources: "+strings.Join(missing, ", "))
		}
		cond := v1.NodeCondition{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: ReasonReady,
			Message: messageReady, LastHeartbeatTime: now, LastTransitionTime: now,
		}
		if len(msgs) > 0 {
			cond.Status, cond.Reason = v1.ConditionFalse, ReasonNotReady
			if len(msgs) == 1 {
				cond.Message = msgs[0]
			} else {
				cond.Message = "[" + strings.Join(msgs, ", ") + "]"
			}
		}
		if i := conditionIndex(node, v1.NodeReady); i >= 0 {
			if node.Status.Conditions[i].Status == cond.Status {
				cond.LastTransitionTime = node.Status.Conditions[i].LastTransitionTime
			}
			node.Status.Conditions[i] = cond
			return nil
		}
		node.Status.Conditions = append(node.Status.Conditions, cond)
		return nil
	}
}

// VolumesInUse reports the volumes in use once synced says the volume
// manager's state is synced; before that it leaves the list as it was.
func VolumesInUse(synced func() bool, inUse func() []v1.UniqueVolumeName) Setter {
	return func(ctx context.Context, node *v1.Node) error {
		if inUse == nil || (synced != nil && !synced()) {
			return nil
		}
		node.Status.VolumesInUse = inUse()
		return nil
	}
}
