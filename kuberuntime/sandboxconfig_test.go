package kuberuntime

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeCgroups struct{}

func (fakeCgroups) PodCgroupParent(pod *v1.Pod) string {
	return "/kubepods/burstable/pod" + string(pod.UID)
}

type fakeClasses map[string]string

func (f fakeClasses) RuntimeClass(_ context.Context, name string) (string, v1.ResourceList, error) {
	if name == "broken" {
		return "", nil, errors.New("backend down")
	}
	h, ok := f[name]
	if !ok {
		return "", nil, ErrRuntimeClassNotFound
	}
	return h, nil, nil
}

func TestCfgSandboxConfig(t *testing.T) {
	uid, gid, fsg := int64(1000), int64(2000), int64(3000)
	share := true
	priv := true
	pod := &v1.Pod{
		ObjectMeta: metaFor("web", "ns1", "uid-1"),
		Spec: v1.PodSpec{
			HostIPC:               true,
			ShareProcessNamespace: &share,
			SecurityContext: &v1.PodSecurityContext{
				RunAsUser: &uid, RunAsGroup: &gid, FSGroup: &fsg, SupplementalGroups: []int64{5, 6},
				Sysctls: []v1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}},
			},
			InitContainers: []v1.Container{{Name: "init", SecurityContext: &v1.SecurityContext{Privileged: &priv}}},
			Containers: []v1.Container{
				{Name: "a", Ports: []v1.ContainerPort{
					{Name: "http", ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1"},
					{Name: "http", ContainerPort: 81}, // same name: dropped
					{ContainerPort: 53, Protocol: v1.ProtocolUDP},
					{ContainerPort: 53, Protocol: v1.ProtocolUDP}, // duplicate: dropped
					{ContainerPort: 9, Protocol: v1.ProtocolSCTP},
				}, Resources: v1.ResourceRequirements{Requests: rl("cpu", "500m")}},
				{Name: "b", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 90}}},
			},
			Overhead: rl("cpu", "100m"),
		},
	}
	b := &configBuilder{cfg: &Config{CgroupParents: fakeCgroups{}, PodLogsRoot: "/logs", DNS: DNSConfig{ResolvConf: "-"}}}
	cfg, err := b.sandboxConfig(t.Context(), pod, 3)
	if err != nil {
		t.Fatal(err)
	}
	md := cfg.Metadata
	if md.Name != "web" || md.Namespace != "ns1" || md.Uid != "uid-1" || md.Attempt != 3 {
		t.Errorf("metadata %v", md)
	}
	if cfg.Hostname != "web" || cfg.LogDirectory != "/logs/ns1_web_uid-1" {
		t.Errorf("hostname %q log dir %q", cfg.Hostname, cfg.LogDirectory)
	}
	if cfg.Labels[LabelPodUID] != "uid-1" || cfg.Labels["app"] != "web" || cfg.Annotations["note"] != `hi "there"` {
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	}
	var ports []string
	for _, p := range cfg.PortMappings {
		ports = append(ports, p.Protocol.String()+"/"+p.HostIp+"/"+itoa(p.ContainerPort)+"/"+itoa(p.HostPort))
	}
	if got := strings.Join(ports, " "); got != "TCP/127.0.0.1/80/8080 UDP//53/0 SCTP//9/0 TCP//90/0" {
		t.Errorf("ports %s", got)
	}
	lc := cfg.Linux
	if lc.CgroupParent != "/kubepods/burstable/poduid-1" || lc.Sysctls["net.core.somaxconn"] != "1024" {
		t.Errorf("linux %v", lc)
	}
	sc := lc.SecurityContext
	if !sc.Privileged || sc.RunAsUser.GetValue() != 1000 || sc.RunAsGroup.GetValue() != 2000 ||
		len(sc.SupplementalGroups) != 3 || sc.SupplementalGroups[0] != 3000 || sc.SupplementalGroups[2] != 6 ||
		sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("security context %v", sc)
	}
	ns := sc.NamespaceOptions
	if ns.Network != runtimeapi.NamespaceMode_POD || ns.Pid != runtimeapi.NamespaceMode_POD || ns.Ipc != runtimeapi.NamespaceMode_NODE {
		t.Errorf("namespaces %v", ns)
	}
	if lc.Resources.CpuShares != 512 || lc.Overhead.CpuShares != 102 || lc.Overhead.CpuQuota != 10000 {
		t.Errorf("resources %v overhead %v", lc.Resources, lc.Overhead)
	}

	// Host network: no hostname, NODE network namespace; nil security context is fine.
	hp := &v1.Pod{ObjectMeta: metaFor("h", "ns1", "uid-2"), Spec: v1.PodSpec{HostNetwork: true, HostPID: true}}
	b = &configBuilder{cfg: &Config{DNS: DNSConfig{ResolvConf: "-"}}}
	cfg, err = b.sandboxConfig(t.Context(), hp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hostname != "" || cfg.LogDirectory != "/var/log/pods/ns1_h_uid-2" || cfg.Linux.CgroupParent != "" ||
		cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_NODE ||
		cfg.Linux.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_NODE ||
		cfg.Linux.SecurityContext.Privileged || cfg.PortMappings != nil {
		t.Errorf("host network sandbox %v", cfg)
	}
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func TestCfgSandboxConfigInvalid(t *testing.T) {
	b := &configBuilder{cfg: &Config{DNS: DNSConfig{ResolvConf: "-"}}}
	bad := "Bad"
	for name, pod := range map[string]*v1.Pod{
		"nil":          nil,
		"no name":      {ObjectMeta: metaFor("", "ns", "u")},
		"slash in ns":  {ObjectMeta: metaFor("a", "x/y", "u")},
		"dotdot uid":   {ObjectMeta: metaFor("a", "ns", "..")},
		"bad hostname": {ObjectMeta: metaFor("a", "ns", "u"), Spec: v1.PodSpec{Hostname: bad}},
		"bad sgpolicy": {ObjectMeta: metaFor("a", "ns", "u"), Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{
			SupplementalGroupsPolicy: ptrTo(v1.SupplementalGroupsPolicy("Weird"))}}},
	} {
		if _, err := b.sandboxConfig(t.Context(), pod, 0); !errors.Is(err, ErrInvalidPod) {
			t.Errorf("%s: err = %v, want ErrInvalidPod", name, err)
		}
	}
}

func TestCfgRuntimeHandler(t *testing.T) {
	pod := func(rc *string) *v1.Pod { return &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: rc}} }
	b := &configBuilder{cfg: &Config{}}
	for _, p := range []*v1.Pod{pod(nil), pod(ptrTo(""))} {
		if h, err := b.runtimeHandler(t.Context(), p); h != "" || err != nil {
			t.Errorf("no class: %q %v", h, err)
		}
	}
	_, err := b.runtimeHandler(t.Context(), pod(ptrTo("kata")))
	if !errors.Is(err, ErrRuntimeClassNotFound) || !strings.Contains(err.Error(), `"kata"`) {
		t.Errorf("nil resolver: %v", err)
	}
	b.cfg.RuntimeClasses = fakeClasses{"kata": "kata-qemu"}
	if h, err := b.runtimeHandler(t.Context(), pod(ptrTo("kata"))); h != "kata-qemu" || err != nil {
		t.Errorf("kata: %q %v", h, err)
	}
	if _, err := b.runtimeHandler(t.Context(), pod(ptrTo("gvisor"))); !errors.Is(err, ErrRuntimeClassNotFound) || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("unknown: %v", err)
	}
	if _, err := b.runtimeHandler(t.Context(), pod(ptrTo("broken"))); err == nil || errors.Is(err, ErrRuntimeClassNotFound) || !strings.Contains(err.Error(), "backend down") {
		t.Errorf("resolver error: %v", err)
	}
}
