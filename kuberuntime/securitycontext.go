package kuberuntime

import (
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// defaultSeccompProfileRoot is where Localhost seccomp profiles live (the
// kubelet's <root-dir>/seccomp).
const defaultSeccompProfileRoot = "/var/lib/kubelet/seccomp"

// Paths of /proc and /sys that a container with procMount Default gets
// masked or read-only (the runtimes' defaults, which the kubelet sends
// explicitly). The kubelet also masks the per-CPU thermal_throttle
// directories that exist on the host; finding them needs a walk of /sys, so
// nodekit leaves them to the runtime's own default list.
func defaultMaskedPaths() []string {
	return []string{
		"/proc/asound",
		"/proc/acpi",
		"/proc/interrupts",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
}

func defaultReadonlyPaths() []string {
	return []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
}

// effectiveSecurityContext merges the pod's security context (user, group,
// non-root, SELinux) with the container's, the container winning field by
// field. It never returns nil and never aliases the pod's pointers.
func effectiveSecurityContext(pod *v1.Pod, c *v1.Container) *v1.SecurityContext {
	eff := &v1.SecurityContext{}
	if psc := pod.Spec.SecurityContext; psc != nil {
		eff.SELinuxOptions = copyPtr(psc.SELinuxOptions)
		eff.RunAsUser = copyPtr(psc.RunAsUser)
		eff.RunAsGroup = copyPtr(psc.RunAsGroup)
		eff.RunAsNonRoot = copyPtr(psc.RunAsNonRoot)
	}
	csc := c.SecurityContext
	if csc == nil {
		return eff
	}
	if csc.SELinuxOptions != nil {
		eff.SELinuxOptions = copyPtr(csc.SELinuxOptions)
	}
	if csc.Capabilities != nil {
		eff.Capabilities = csc.Capabilities.DeepCopy()
	}
	if csc.Privileged != nil {
		eff.Privileged = copyPtr(csc.Privileged)
	}
	if csc.RunAsUser != nil {
		eff.RunAsUser = copyPtr(csc.RunAsUser)
	}
	if csc.RunAsGroup != nil {
		eff.RunAsGroup = copyPtr(csc.RunAsGroup)
	}
	if csc.RunAsNonRoot != nil {
		eff.RunAsNonRoot = copyPtr(csc.RunAsNonRoot)
	}
	eff.ReadOnlyRootFilesystem = copyPtr(csc.ReadOnlyRootFilesystem)
	eff.AllowPrivilegeEscalation = copyPtr(csc.AllowPrivilegeEscalation)
	eff.ProcMount = copyPtr(csc.ProcMount)
	return eff
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// verifyRunAsNonRoot fails when runAsNonRoot is set and the effective
// runAsUser is 0. Without a runAsUser the check needs the image's user, which
// the runtime knows only after a pull: the caller may pass it (imageUID, nil
// when unknown or non-numeric).
func verifyRunAsNonRoot(pod *v1.Pod, c *v1.Container, imageUID *int64) error {
	eff := effectiveSecurityContext(pod, c)
	if eff.RunAsNonRoot == nil || !*eff.RunAsNonRoot {
		return nil
	}
	if eff.RunAsUser != nil {
		if *eff.RunAsUser == 0 {
			return fmt.Errorf("container %q: runAsUser 0 breaks the runAsNonRoot policy", c.Name)
		}
		return nil
	}
	if imageUID != nil && *imageUID == 0 {
		return fmt.Errorf("container %q has runAsNonRoot and its image will run as root", c.Name)
	}
	return nil
}

// capabilityName writes a capability the way CRI runtimes expect it:
// upper-case without the CAP_ prefix (containerd and CRI-O add "CAP_"
// themselves; "ALL" stays "ALL"). This is what the kubelet passes for a
// well-formed spec ("NET_ADMIN"); nodekit also tidies "cap_net_admin".
func capabilityName(c v1.Capability) string {
	s := strings.ToUpper(strings.TrimSpace(string(c)))
	return strings.TrimPrefix(s, "CAP_")
}

func runtimeCapabilities(caps *v1.Capabilities) *runtimeapi.Capability {
	if caps == nil {
		return nil
	}
	out := &runtimeapi.Capability{
		AddCapabilities:  make([]string, 0, len(caps.Add)),
		DropCapabilities: make([]string, 0, len(caps.Drop)),
	}
	for _, c := range caps.Add {
		out.AddCapabilities = append(out.AddCapabilities, capabilityName(c))
	}
	for _, c := range caps.Drop {
		out.DropCapabilities = append(out.DropCapabilities, capabilityName(c))
	}
	return out
}

func runtimeSELinux(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// namespaceOptions are the pod's network, PID and IPC namespace modes.
func namespaceOptions(pod *v1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: runtimeapi.NamespaceMode_POD,
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// hasPrivilegedContainer: any init, regular or ephemeral container privileged.
func hasPrivilegedContainer(pod *v1.Pod) bool {
	priv := func(sc *v1.SecurityContext) bool {
		return sc != nil && sc.Privileged != nil && *sc.Privileged
	}
	for i := range pod.Spec.InitContainers {
		if priv(pod.Spec.InitContainers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if priv(pod.Spec.Containers[i].SecurityContext) {
			return true
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if priv(pod.Spec.EphemeralContainers[i].SecurityContext) {
			return true
		}
	}
	return false
}

// podSupplementalGroups: fsGroup first, then supplementalGroups, in order.
func podSupplementalGroups(psc *v1.PodSecurityContext) []int64 {
	if psc == nil {
		return nil
	}
	var out []int64
	if psc.FSGroup != nil {
		out = append(out, *psc.FSGroup)
	}
	out = append(out, psc.SupplementalGroups...)
	return out
}

func supplementalGroupsPolicy(psc *v1.PodSecurityContext) (runtimeapi.SupplementalGroupsPolicy, error) {
	if psc == nil || psc.SupplementalGroupsPolicy == nil {
		return runtimeapi.SupplementalGroupsPolicy_Merge, nil
	}
	v, ok := runtimeapi.SupplementalGroupsPolicy_value[string(*psc.SupplementalGroupsPolicy)]
	if !ok {
		return 0, fmt.Errorf("spec.securityContext.supplementalGroupsPolicy: unsupported value %q", *psc.SupplementalGroupsPolicy)
	}
	return runtimeapi.SupplementalGroupsPolicy(v), nil
}

// seccompFromField turns a seccomp profile field into the CRI profile;
// nil means Unconfined unless fallbackDefault (the kubelet's --seccomp-default).
func seccompFromField(p *v1.SeccompProfile, root string, fallbackDefault bool) (*runtimeapi.SecurityProfile, error) {
	if p == nil {
		if fallbackDefault {
			return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	}
	switch p.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, fmt.Errorf("seccompProfile: localhostProfile must be set when type is Localhost")
		}
		return &runtimeapi.SecurityProfile{
			ProfileType:  runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, *p.LocalhostProfile),
		}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// seccompProfile: the container's field, else the pod's, else the default.
func (b *configBuilder) seccompProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, error) {
	root := b.seccompProfileRoot
	if root == "" {
		root = defaultSeccompProfileRoot
	}
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return seccompFromField(c.SecurityContext.SeccompProfile, root, b.seccompDefault)
	}
	if pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.SeccompProfile != nil {
		return seccompFromField(pod.Spec.SecurityContext.SeccompProfile, root, b.seccompDefault)
	}
	return seccompFromField(nil, root, b.seccompDefault)
}

// appArmorProfile: the container's field, else the deprecated per-container
// pod annotation, else the pod's field; nil when none. The second result is
// the deprecated string form runtimes still read.
func appArmorProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	var p *v1.AppArmorProfile
	switch {
	case c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil:
		p = c.SecurityContext.AppArmorProfile
	default:
		if val, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
			switch {
			case val == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
				p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
			case val == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
				p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
			case strings.HasPrefix(val, v1.DeprecatedAppArmorBetaProfileNamePrefix):
				name := strings.TrimPrefix(val, v1.DeprecatedAppArmorBetaProfileNamePrefix)
				p = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
			}
		}
		if p == nil && pod.Spec.SecurityContext != nil {
			p = pod.Spec.SecurityContext.AppArmorProfile
		}
	}
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			v1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			v1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil || *p.LocalhostProfile == "" {
			return nil, "", fmt.Errorf("appArmorProfile: missing localhost profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("appArmorProfile: unknown type %q", p.Type)
}

// containerSecurityContext is the CRI security context of one container.
func (b *configBuilder) containerSecurityContext(pod *v1.Pod, c *v1.Container) (*runtimeapi.LinuxContainerSecurityContext, error) {
	eff := effectiveSecurityContext(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{
		Capabilities:   runtimeCapabilities(eff.Capabilities),
		SelinuxOptions: runtimeSELinux(eff.SELinuxOptions),
	}
	if eff.Privileged != nil {
		sc.Privileged = *eff.Privileged
	}
	if eff.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *eff.ReadOnlyRootFilesystem
	}
	if eff.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *eff.RunAsUser}
	}
	if eff.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *eff.RunAsGroup}
	}
	var err error
	if sc.Seccomp, err = b.seccompProfile(pod, c); err != nil {
		return nil, err
	}
	//lint:ignore SA1019 older runtimes (containerd 1.6) read the deprecated field
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c); err != nil {
		return nil, err
	}
	sc.NamespaceOptions = namespaceOptions(pod)
	sc.SupplementalGroups = podSupplementalGroups(pod.Spec.SecurityContext)
	if sc.SupplementalGroupsPolicy, err = supplementalGroupsPolicy(pod.Spec.SecurityContext); err != nil {
		return nil, err
	}
	// no_new_privs only when allowPrivilegeEscalation is explicitly false.
	sc.NoNewPrivs = eff.AllowPrivilegeEscalation != nil && !*eff.AllowPrivilegeEscalation
	if eff.ProcMount != nil && *eff.ProcMount == v1.UnmaskedProcMount {
		sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
	} else {
		sc.MaskedPaths, sc.ReadonlyPaths = defaultMaskedPaths(), defaultReadonlyPaths()
	}
	return sc, nil
}

// sandboxSecurityContext is the CRI security context of the pod's sandbox.
// The sandbox always runs with the runtime's default seccomp profile (the
// pause process needs nothing else).
func sandboxSecurityContext(pod *v1.Pod) (*runtimeapi.LinuxSandboxSecurityContext, error) {
	sc := &runtimeapi.LinuxSandboxSecurityContext{
		Privileged:       hasPrivilegedContainer(pod),
		Seccomp:          &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
		NamespaceOptions: namespaceOptions(pod),
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		return sc, nil
	}
	if psc.RunAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
	}
	if psc.RunAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
	}
	sc.SupplementalGroups = podSupplementalGroups(psc)
	var err error
	if sc.SupplementalGroupsPolicy, err = supplementalGroupsPolicy(psc); err != nil {
		return nil, err
	}
	sc.SelinuxOptions = runtimeSELinux(psc.SELinuxOptions)
	return sc, nil
}
