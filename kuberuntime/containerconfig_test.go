package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeMounts struct{ err error }

func (f fakeMounts) ContainerMounts(_ context.Context, _ *v1.Pod, c *v1.Container) ([]*runtimeapi.Mount, error) {
	if f.err != nil {
		return nil, f.err
	}
	return []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/vol/" + c.Name}}, nil
}

func TestCfgContainerConfig(t *testing.T) {
	grace := int64(30)
	c := v1.Container{
		Name:       "app",
		Image:      "nginx:1.27",
		Command:    []string{"/bin/sh", "-c", "echo $(GREETING) $$(GREETING) $(MISSING)"},
		Args:       []string{"$(GREETING)"},
		WorkingDir: "/srv",
		Env:        []v1.EnvVar{{Name: "GREETING", Value: "hello"}},
		Stdin:      true, StdinOnce: true, TTY: true,
		Resources: v1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "256Mi"), Limits: rl("cpu", "500m", "memory", "512Mi")},
		Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}},
	}
	pod := envPod(c)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	b := &configBuilder{cfg: &Config{Mounts: fakeMounts{}}, machineMemory: 1 << 30}
	cfg, err := b.containerConfig(t.Context(), containerInput{
		Pod: pod, Container: &pod.Spec.Containers[0], ContainerType: ContainerTypeRegular,
		RestartCount: 4, ImageRef: "sha256:abc", Hash: 0xbeef,
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metadata.Name != "app" || cfg.Metadata.Attempt != 4 {
		t.Errorf("metadata %v", cfg.Metadata)
	}
	if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "nginx:1.27" {
		t.Errorf("image %v", cfg.Image)
	}
	if got := strings.Join(cfg.Command, "|"); got != "/bin/sh|-c|echo hello $(GREETING) $(MISSING)" {
		t.Errorf("command %q", got)
	}
	if got := strings.Join(cfg.Args, "|"); got != "hello" || cfg.WorkingDir != "/srv" {
		t.Errorf("args %q workdir %q", got, cfg.WorkingDir)
	}
	if cfg.LogPath != "app/4.log" || !cfg.Stdin || !cfg.StdinOnce || !cfg.Tty {
		t.Errorf("log path %q stdin %v %v tty %v", cfg.LogPath, cfg.Stdin, cfg.StdinOnce, cfg.Tty)
	}
	if cfg.Labels[LabelContainerName] != "app" || cfg.Labels[LabelContainerType] != ContainerTypeRegular || cfg.Labels[LabelPodUID] != "uid-1" {
		t.Errorf("labels %v", cfg.Labels)
	}
	if cfg.Annotations[AnnotationContainerHash] != "beef" || cfg.Annotations[AnnotationRestartCount] != "4" ||
		cfg.Annotations[AnnotationTerminationGrace] != "30" || cfg.Annotations[AnnotationHasPreStop] != "true" {
		t.Errorf("annotations %v", cfg.Annotations)
	}
	if len(cfg.Envs) != 1 || cfg.Envs[0].Key != "GREETING" || string(cfg.Envs[0].Value) != "hello" {
		t.Errorf("envs %v", cfg.Envs)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0].HostPath != "/vol/app" {
		t.Errorf("mounts %v", cfg.Mounts)
	}
	r := cfg.Linux.Resources
	// Burstable, 256Mi of 1Gi: 1000 - 250 = 750.
	if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 512<<20 || r.OomScoreAdj != 750 {
		t.Errorf("resources %v", r)
	}
	sc := cfg.Linux.SecurityContext
	if sc.NamespaceOptions.GetPid() != runtimeapi.NamespaceMode_CONTAINER || sc.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_Unconfined ||
		len(sc.MaskedPaths) == 0 || !slices.Contains(sc.ReadonlyPaths, "/proc/sys") || sc.NoNewPrivs || sc.Privileged {
		t.Errorf("security context %v", sc)
	}

	// Without a MountProvider: no mounts. Memory capacity from NodeAllocatable.
	b = &configBuilder{cfg: &Config{NodeAllocatable: func() v1.ResourceList { return rl("memory", "2Gi") }}}
	cfg, err = b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.Containers[0]})
	if err != nil || cfg.Mounts != nil || cfg.Linux.Resources.OomScoreAdj != 875 {
		t.Errorf("no mounts: %v %v oom %d", err, cfg.GetMounts(), cfg.GetLinux().GetResources().GetOomScoreAdj())
	}

	// A failing MountProvider is a config error.
	b = &configBuilder{cfg: &Config{Mounts: fakeMounts{err: errors.New("subPath escapes")}}}
	if _, err := b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.Containers[0]}); !errors.Is(err, ErrCreateContainerConfig) ||
		!strings.Contains(err.Error(), "subPath escapes") {
		t.Errorf("mount error: %v", err)
	}
}

func TestCfgContainerSecurityContext(t *testing.T) {
	u0, u1000, g := int64(0), int64(1000), int64(50)
	yes, no := true, false
	unmasked := v1.UnmaskedProcMount
	for _, tc := range []struct {
		name    string
		podSC   *v1.PodSecurityContext
		cSC     *v1.SecurityContext
		annot   map[string]string
		check   func(*runtimeapi.LinuxContainerSecurityContext) bool
		wantErr bool
	}{
		{"nil contexts", nil, nil, nil, func(s *runtimeapi.LinuxContainerSecurityContext) bool {
			return s.RunAsUser == nil && s.Capabilities == nil && !s.NoNewPrivs && len(s.MaskedPaths) == 12 && len(s.ReadonlyPaths) == 5 &&
				s.Seccomp.ProfileType == runtimeapi.SecurityProfile_Unconfined && s.Apparmor == nil
		}, false},
		{"pod user, container group", &v1.PodSecurityContext{RunAsUser: &u1000, FSGroup: &g, SupplementalGroups: []int64{7}}, &v1.SecurityContext{RunAsGroup: &g},
			nil, func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return s.RunAsUser.GetValue() == 1000 && s.RunAsGroup.GetValue() == 50 && slices.Equal(s.SupplementalGroups, []int64{50, 7})
			}, false},
		{"container user wins", &v1.PodSecurityContext{RunAsUser: &u1000}, &v1.SecurityContext{RunAsUser: &u0}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool { return s.RunAsUser.GetValue() == 0 }, false},
		{"capabilities", nil, &v1.SecurityContext{Capabilities: &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN", "cap_sys_time"}, Drop: []v1.Capability{"ALL"}}}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return slices.Equal(s.Capabilities.AddCapabilities, []string{"NET_ADMIN", "SYS_TIME"}) && slices.Equal(s.Capabilities.DropCapabilities, []string{"ALL"})
			}, false},
		{"privileged, ro rootfs, no escalation", nil, &v1.SecurityContext{Privileged: &yes, ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return s.Privileged && s.ReadonlyRootfs && s.NoNewPrivs
			}, false},
		{"escalation allowed", nil, &v1.SecurityContext{AllowPrivilegeEscalation: &yes}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool { return !s.NoNewPrivs }, false},
		{"unmasked proc", nil, &v1.SecurityContext{ProcMount: &unmasked}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return s.MaskedPaths != nil && len(s.MaskedPaths) == 0 && len(s.ReadonlyPaths) == 0
			}, false},
		{"seccomp from pod", &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}, nil, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return s.Seccomp.ProfileType == runtimeapi.SecurityProfile_RuntimeDefault
			}, false},
		{"seccomp container localhost wins", &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}},
			&v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("prof.json")}}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				return s.Seccomp.ProfileType == runtimeapi.SecurityProfile_Localhost && s.Seccomp.LocalhostRef == "/var/lib/kubelet/seccomp/prof.json"
			}, false},
		{"seccomp localhost without profile", nil, &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}, nil, nil, true},
		{"apparmor pod field", &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, nil, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				//lint:ignore SA1019 older runtimes read the deprecated field; the test checks it is set
				return s.Apparmor.ProfileType == runtimeapi.SecurityProfile_RuntimeDefault && s.ApparmorProfile == "runtime/default"
			}, false},
		{"apparmor annotation beats pod field", &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}, nil,
			map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "localhost/myprof"},
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				//lint:ignore SA1019 older runtimes read the deprecated field; the test checks it is set
				return s.Apparmor.ProfileType == runtimeapi.SecurityProfile_Localhost && s.Apparmor.LocalhostRef == "myprof" && s.ApparmorProfile == "localhost/myprof"
			}, false},
		{"apparmor container field wins", nil, &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}},
			map[string]string{"container.apparmor.security.beta.kubernetes.io/app": "localhost/myprof"},
			func(s *runtimeapi.LinuxContainerSecurityContext) bool {
				//lint:ignore SA1019 older runtimes read the deprecated field; the test checks it is set
				return s.Apparmor.ProfileType == runtimeapi.SecurityProfile_Unconfined && s.ApparmorProfile == "unconfined"
			}, false},
		{"runAsNonRoot with user 0", &v1.PodSecurityContext{RunAsNonRoot: &yes}, &v1.SecurityContext{RunAsUser: &u0}, nil, nil, true},
		{"runAsNonRoot pod user 0", &v1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &u0}, nil, nil, nil, true},
		{"runAsNonRoot with user 1000", &v1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &u0}, &v1.SecurityContext{RunAsUser: &u1000}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool { return s.RunAsUser.GetValue() == 1000 }, false},
		{"runAsNonRoot overridden false", &v1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &u0}, &v1.SecurityContext{RunAsNonRoot: &no}, nil,
			func(s *runtimeapi.LinuxContainerSecurityContext) bool { return s.RunAsUser.GetValue() == 0 }, false},
	} {
		c := v1.Container{Name: "app", SecurityContext: tc.cSC}
		pod := &v1.Pod{ObjectMeta: metaFor("p", "ns", "u"), Spec: v1.PodSpec{SecurityContext: tc.podSC, Containers: []v1.Container{c}}}
		pod.Annotations = tc.annot
		b := &configBuilder{cfg: &Config{}}
		cfg, err := b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.Containers[0]})
		if tc.wantErr {
			if !errors.Is(err, ErrCreateContainerConfig) || !strings.Contains(err.Error(), `"app"`) {
				t.Errorf("%s: err = %v, want ErrCreateContainerConfig naming the container", tc.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !tc.check(cfg.Linux.SecurityContext) {
			t.Errorf("%s: %v", tc.name, cfg.Linux.SecurityContext)
		}
	}
	// --seccomp-default and a custom profile root.
	pod := &v1.Pod{ObjectMeta: metaFor("p", "ns", "u"), Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", SecurityContext: &v1.SecurityContext{
		SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: ptrTo("x.json")}}}, {Name: "b"}}}}
	b := &configBuilder{cfg: &Config{}, seccompDefault: true, seccompProfileRoot: "/etc/seccomp"}
	s1, _ := b.containerSecurityContext(pod, &pod.Spec.Containers[0])
	s2, _ := b.containerSecurityContext(pod, &pod.Spec.Containers[1])
	if s1.Seccomp.LocalhostRef != "/etc/seccomp/x.json" || s2.Seccomp.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
		t.Errorf("seccomp default: %v %v", s1.Seccomp, s2.Seccomp)
	}
}

func TestCfgContainerConfigWeirdInput(t *testing.T) {
	b := &configBuilder{cfg: &Config{}}
	good := &v1.Pod{ObjectMeta: metaFor("p", "ns", "u")}
	for name, in := range map[string]containerInput{
		"nil container":  {Pod: good},
		"nil pod":        {Container: &v1.Container{Name: "a"}},
		"empty name":     {Pod: good, Container: &v1.Container{}},
		"slash name":     {Pod: good, Container: &v1.Container{Name: "a/b"}},
		"negative count": {Pod: good, Container: &v1.Container{Name: "a"}, RestartCount: -1},
		"fileKeyRef": {Pod: good, Container: &v1.Container{Name: "a", Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{
			FileKeyRef: &v1.FileKeySelector{VolumeName: "v", Path: "p", Key: "k"}}}}}},
	} {
		if _, err := b.containerConfig(t.Context(), in); !errors.Is(err, ErrCreateContainerConfig) {
			t.Errorf("%s: err = %v, want ErrCreateContainerConfig", name, err)
		}
	}
	// A sidecar (restartable init container) gets the sidecar label.
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metaFor("p", "ns", "u"), Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "s", RestartPolicy: &always}}}}
	cfg, err := b.containerConfig(t.Context(), containerInput{Pod: pod, Container: &pod.Spec.InitContainers[0], ContainerType: ContainerTypeSidecar})
	if err != nil || cfg.Labels[LabelContainerType] != ContainerTypeSidecar || cfg.Linux.Resources.OomScoreAdj != 1000 {
		t.Errorf("sidecar: %v %v", err, cfg)
	}
}

func BenchmarkCfgContainerConfig(b *testing.B) {
	c := v1.Container{
		Name: "app", Image: "nginx", Command: []string{"sh", "-c", "echo $(A) $(B)"},
		Env:       []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-2"}, {Name: "N", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		Resources: v1.ResourceRequirements{Requests: rl("cpu", "100m", "memory", "64Mi"), Limits: rl("cpu", "1", "memory", "128Mi")},
	}
	pod := envPod(c)
	cb := &configBuilder{cfg: &Config{}}
	in := containerInput{Pod: pod, Container: &pod.Spec.Containers[0], ContainerType: ContainerTypeRegular, ImageRef: "sha256:1"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cb.containerConfig(b.Context(), in); err != nil {
			b.Fatal(err)
		}
	}
}
