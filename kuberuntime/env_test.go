package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func mapLookup(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestCfgExpandVars(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_EMPTY": "", "a b": "space"}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"$(VAR_A)", "A"},
		{"___$(VAR_B)___", "___B___"},
		{"$(VAR_A)-$(VAR_B)", "A-B"},
		{"$(VAR_EMPTY)x", "x"},
		{"$(UNKNOWN)", "$(UNKNOWN)"},
		{"$(VAR_A", "$(VAR_A"},
		{"$(", "$("},
		{"$()", "$()"},
		{"$", "$"},
		{"x$", "x$"},
		{"$$", "$"},
		{"$$(VAR_A)", "$(VAR_A)"},
		{"$$$(VAR_A)", "$A"},
		{"$$$$(VAR_A)", "$$(VAR_A)"},
		{"$VAR_A", "$VAR_A"},
		{"$(VAR_A)$(VAR_A", "A$(VAR_A"},
		{"$(a b)", "space"},
		{"$($(VAR_A))", "$($(VAR_A))"},
		{"$(VAR_A))", "A)"},
		{"$(($(VAR_A)", "$(($(VAR_A)"},
		{"$\xff", "$\uFFFD"},
		{"日本$(VAR_A)語", "日本A語"},
		{"$日", "$日"},
	} {
		if got := expandVars(tc.in, mapLookup(vars)); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Oversized input is left alone.
	big := strings.Repeat("$(VAR_A)", maxExpandInput/8+1)
	if got := expandVars(big, mapLookup(vars)); got != big {
		t.Error("oversized input was expanded")
	}
}

// refExpand is an independent model of Kubernetes' expansion (a token
// scanner over runes), used to check expandVars on fuzzed input.
func refExpand(s string, lookup func(string) (string, bool)) string {
	var out []byte
	for len(s) > 0 {
		if s[0] != '$' || len(s) == 1 {
			out = append(out, s[0])
			s = s[1:]
			continue
		}
		switch {
		case s[1] == '$':
			out = append(out, '$')
			s = s[2:]
		case s[1] == '(':
			close := strings.IndexByte(s[2:], ')')
			if close < 0 {
				out = append(out, "$("...)
				s = s[2:]
				continue
			}
			name := s[2 : 2+close]
			if v, ok := lookup(name); ok {
				out = append(out, v...)
			} else {
				out = append(out, "$("+name+")"...)
			}
			s = s[2+close+1:]
		default:
			r, size := utf8.DecodeRuneInString(s[1:])
			out = append(out, '$')
			out = utf8.AppendRune(out, r)
			s = s[1+size:]
		}
	}
	return string(out)
}

func FuzzCfgExpandVars(f *testing.F) {
	for _, s := range []string{"", "$", "$$", "$(A)", "$$(A)", "$(A", "a$(B)c$(D)", "$\xff", "$(A)$(", "日$本"} {
		f.Add(s)
	}
	vars := map[string]string{"A": "x", "B": "$(A)", "": "empty", "D": "$"}
	f.Fuzz(func(t *testing.T, s string) {
		got := expandVars(s, mapLookup(vars))
		if want := refExpand(s, mapLookup(vars)); got != want {
			t.Fatalf("expandVars(%q) = %q, model says %q", s, got, want)
		}
		// With nothing defined, only $$ and invalid UTF-8 after $ change the text.
		if !strings.Contains(s, "$$") && utf8.ValidString(s) {
			if got := expandVars(s, mapLookup(nil)); got != s {
				t.Fatalf("expandVars(%q) with no vars = %q", s, got)
			}
		}
	})
}

type fakeEnvSources struct {
	cms     map[string]*v1.ConfigMap
	secrets map[string]*v1.Secret
	err     error
	calls   int
}

func (f *fakeEnvSources) ConfigMap(_ context.Context, ns, name string) (*v1.ConfigMap, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	if cm, ok := f.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f *fakeEnvSources) Secret(_ context.Context, ns, name string) (*v1.Secret, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return f.secrets[ns+"/"+name], nil // (nil, nil) is "not found" too
}

func envPod(c v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaFor("web", "ns1", "uid-1"),
		Spec:       v1.PodSpec{NodeName: "node-a", ServiceAccountName: "sa", Containers: []v1.Container{c}},
	}
}

func envOf(t *testing.T, b *configBuilder, in containerInput) []string {
	t.Helper()
	l, err := b.containerEnv(t.Context(), in)
	if err != nil {
		t.Fatalf("containerEnv: %v", err)
	}
	out := make([]string, 0, len(l.names))
	for _, n := range l.names {
		out = append(out, n+"="+l.values[n])
	}
	return out
}

func TestCfgEnvOrderAndExpansion(t *testing.T) {
	c := v1.Container{
		Name: "app",
		EnvFrom: []v1.EnvFromSource{
			{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "S_", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
		},
		Env: []v1.EnvVar{
			{Name: "FIRST", Value: "1"},
			{Name: "SECOND", Value: "$(FIRST)-$(THIRD)-$(FROM_CM)-$(S_tok)"},
			{Name: "THIRD", Value: "3"},
			{Name: "FROM_CM", Value: "override:$(FROM_CM)"},
			{Name: "ESC", Value: "$$(FIRST)"},
			{Name: "EMPTY"},
		},
	}
	src := &fakeEnvSources{
		cms:     map[string]*v1.ConfigMap{"ns1/cm": {Data: map[string]string{"FROM_CM": "cm", "B_KEY": "b", "A_KEY": "a", "bad=key": "x"}}},
		secrets: map[string]*v1.Secret{"ns1/sec": {Data: map[string][]byte{"tok": []byte("s3cret")}}},
	}
	b := &configBuilder{cfg: &Config{}, envSources: src}
	got := envOf(t, b, containerInput{Pod: envPod(c), Container: &c})
	want := []string{
		"A_KEY=a", "B_KEY=b", "FROM_CM=override:cm", "S_tok=s3cret",
		"FIRST=1", "SECOND=1-$(THIRD)-cm-s3cret", "THIRD=3", "ESC=$(FIRST)", "EMPTY=",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("env:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if src.calls != 2 {
		t.Errorf("getter calls = %d, want 2", src.calls)
	}
}

func metaFor(name, ns, uid string) (m metav1.ObjectMeta) {
	m.Name, m.Namespace, m.UID = name, ns, types.UID(uid)
	m.Labels = map[string]string{"app": "web", "tier": "front"}
	m.Annotations = map[string]string{"note": "hi \"there\""}
	return m
}

func TestCfgEnvFieldRefs(t *testing.T) {
	fr := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := v1.Container{Name: "app", Env: []v1.EnvVar{
		fr("NAME", "metadata.name"), fr("NS", "metadata.namespace"), fr("UID", "metadata.uid"),
		fr("LABEL", "metadata.labels['app']"), fr("NOLABEL", "metadata.labels['zzz']"),
		fr("ANN", "metadata.annotations['note']"), fr("LABELS", "metadata.labels"),
		fr("NODE", "spec.nodeName"), fr("SA", "spec.serviceAccountName"),
		fr("HOSTIP", "status.hostIP"), fr("HOSTIPS", "status.hostIPs"),
		fr("PODIP", "status.podIP"), fr("PODIPS", "status.podIPs"),
		{Name: "REF", Value: "$(NAME).$(NS)"},
	}}
	b := &configBuilder{cfg: &Config{NodeName: "cfg-node"}, hostIPs: func() []string { return []string{"10.0.0.1", "fd00::1"} }}
	got := envOf(t, b, containerInput{Pod: envPod(c), Container: &c, PodIPs: []string{"10.1.0.5", "fd01::5"}})
	want := []string{
		"NAME=web", "NS=ns1", "UID=uid-1", "LABEL=web", "NOLABEL=", `ANN=hi "there"`,
		"LABELS=app=\"web\"\ntier=\"front\"", "NODE=node-a", "SA=sa",
		"HOSTIP=10.0.0.1", "HOSTIPS=10.0.0.1,fd00::1", "PODIP=10.1.0.5", "PODIPS=10.1.0.5,fd01::5", "REF=web.ns1",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("env:\n%q\nwant:\n%q", got, want)
	}

	// spec.nodeName falls back to Config.NodeName; host IPs to the pod status.
	pod := envPod(c)
	pod.Spec.NodeName = ""
	pod.Status.HostIPs = []v1.HostIP{{IP: "192.168.0.9"}}
	b = &configBuilder{cfg: &Config{NodeName: "cfg-node"}}
	got = envOf(t, b, containerInput{Pod: pod, Container: &c})
	if got[7] != "NODE=cfg-node" || got[9] != "HOSTIP=192.168.0.9" || got[11] != "PODIP=" {
		t.Errorf("fallbacks: %q", got)
	}

	// Unknown host IP and unsupported paths are errors.
	pod.Status.HostIPs = nil
	if _, err := b.containerEnv(t.Context(), containerInput{Pod: pod, Container: &c}); err == nil {
		t.Error("no host IP: want error")
	}
	bad := v1.Container{Name: "app", Env: []v1.EnvVar{fr("X", "spec.restartPolicy")}}
	if _, err := b.containerEnv(t.Context(), containerInput{Pod: envPod(bad), Container: &bad}); err == nil {
		t.Error("unsupported path: want error")
	}
}

func TestCfgEnvResourceFieldRefs(t *testing.T) {
	rf := func(name, res, divisor, container string) v1.EnvVar {
		s := &v1.ResourceFieldSelector{Resource: res, ContainerName: container}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: s}}
	}
	c := v1.Container{
		Name: "app",
		Resources: v1.ResourceRequirements{
			Requests: rl("cpu", "250m", "memory", "100Mi", "ephemeral-storage", "1Gi"),
			Limits:   rl("cpu", "1500m", "memory", "200Mi", "hugepages-2Mi", "4Mi"),
		},
		Env: []v1.EnvVar{
			rf("CPU_LIM", "limits.cpu", "", ""),     // 1.5 cores rounds up to 2
			rf("CPU_LIM_M", "limits.cpu", "1m", ""), // 1500
			rf("CPU_REQ", "requests.cpu", "", ""),   // 0.25 -> 1
			rf("CPU_REQ_100M", "requests.cpu", "100m", ""),
			rf("MEM_LIM", "limits.memory", "", ""),
			rf("MEM_LIM_MI", "limits.memory", "1Mi", ""),
			rf("MEM_REQ_GI", "requests.memory", "1Gi", ""), // rounds up to 1
			rf("EPH_REQ_MI", "requests.ephemeral-storage", "1Mi", ""),
			rf("EPH_LIM", "limits.ephemeral-storage", "1Gi", ""), // from allocatable
			rf("HP", "limits.hugepages-2Mi", "1Mi", ""),
			rf("OTHER_CPU", "limits.cpu", "1m", "other"),
			rf("OTHER_MEM", "limits.memory", "", "other"), // no limit -> allocatable
		},
	}
	pod := envPod(c)
	pod.Spec.Containers = append(pod.Spec.Containers, ctr("other", nil, rl("cpu", "300m")))
	b := &configBuilder{cfg: &Config{NodeAllocatable: func() v1.ResourceList {
		return rl("cpu", "4", "memory", "8Gi", "ephemeral-storage", "100Gi")
	}}}
	got := envOf(t, b, containerInput{Pod: pod, Container: &pod.Spec.Containers[0]})
	want := []string{
		"CPU_LIM=2", "CPU_LIM_M=1500", "CPU_REQ=1", "CPU_REQ_100M=3", "MEM_LIM=209715200", "MEM_LIM_MI=200",
		"MEM_REQ_GI=1", "EPH_REQ_MI=1024", "EPH_LIM=100", "HP=4", "OTHER_CPU=300", "OTHER_MEM=8589934592",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("env:\n%q\nwant:\n%q", got, want)
	}

	// Without NodeAllocatable a missing limit reads 0.
	b = &configBuilder{cfg: &Config{}}
	e := rf("X", "limits.memory", "", "")
	c2 := v1.Container{Name: "x", Env: []v1.EnvVar{e}}
	if got := envOf(t, b, containerInput{Pod: envPod(c2), Container: &c2}); got[0] != "X=0" {
		t.Errorf("no allocatable: %q", got)
	}
	for _, bad := range []v1.EnvVar{rf("X", "limits.gpu", "", ""), rf("X", "cpu", "", ""), rf("X", "limits.cpu", "", "nope")} {
		c3 := v1.Container{Name: "x", Env: []v1.EnvVar{bad}}
		if _, err := b.containerEnv(t.Context(), containerInput{Pod: envPod(c3), Container: &c3}); err == nil {
			t.Errorf("%+v: want error", bad.ValueFrom.ResourceFieldRef)
		}
	}
}

func TestCfgEnvSourcesMissing(t *testing.T) {
	yes := true
	cmKey := func(name, key string, opt *bool) v1.EnvVar {
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: opt}}}
	}
	secKey := func(name, key string, opt *bool) v1.EnvVar {
		return v1.EnvVar{Name: "V", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
			LocalObjectReference: v1.LocalObjectReference{Name: name}, Key: key, Optional: opt}}}
	}
	src := &fakeEnvSources{
		cms:     map[string]*v1.ConfigMap{"ns1/cm": {Data: map[string]string{"k": "v"}}},
		secrets: map[string]*v1.Secret{"ns1/sec": {Data: map[string][]byte{"k": []byte("sv")}}},
	}
	for _, tc := range []struct {
		name    string
		c       v1.Container
		getter  EnvSourceGetter
		want    string // env or "" for none
		wantErr string
	}{
		{"cm key", v1.Container{Env: []v1.EnvVar{cmKey("cm", "k", nil)}}, src, "V=v", ""},
		{"secret key", v1.Container{Env: []v1.EnvVar{secKey("sec", "k", nil)}}, src, "V=sv", ""},
		{"missing cm", v1.Container{Env: []v1.EnvVar{cmKey("nope", "k", nil)}}, src, "", "configMap ns1/nope not found"},
		{"missing cm optional", v1.Container{Env: []v1.EnvVar{cmKey("nope", "k", &yes)}}, src, "", ""},
		{"missing key", v1.Container{Env: []v1.EnvVar{cmKey("cm", "x", nil)}}, src, "", `key "x" not found in configMap ns1/cm`},
		{"missing key optional", v1.Container{Env: []v1.EnvVar{cmKey("cm", "x", &yes)}}, src, "", ""},
		{"missing secret", v1.Container{Env: []v1.EnvVar{secKey("nope", "k", nil)}}, src, "", "secret ns1/nope not found"},
		{"missing secret optional", v1.Container{Env: []v1.EnvVar{secKey("nope", "k", &yes)}}, src, "", ""},
		{"missing secret key optional", v1.Container{Env: []v1.EnvVar{secKey("sec", "x", &yes)}}, src, "", ""},
		{"envFrom missing optional", v1.Container{EnvFrom: []v1.EnvFromSource{{ConfigMapRef: &v1.ConfigMapEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}, Optional: &yes}}}}, src, "", ""},
		{"envFrom missing", v1.Container{EnvFrom: []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}}}, src, "", "secret ns1/nope not found"},
		{"nil getter", v1.Container{Env: []v1.EnvVar{cmKey("cm", "k", &yes)}}, nil, "", "configMap ns1/cm: no EnvSourceGetter"},
		{"getter error", v1.Container{Env: []v1.EnvVar{secKey("sec", "k", &yes)}}, &fakeEnvSources{err: errors.New("boom")}, "", "boom"},
	} {
		tc.c.Name = "app"
		b := &configBuilder{cfg: &Config{}, envSources: tc.getter}
		_, err := b.buildContainerConfig(t.Context(), containerInput{Pod: envPod(tc.c), Container: &tc.c})
		if tc.wantErr != "" {
			if err == nil || !errors.Is(err, ErrCreateContainerConfig) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), `"app"`) {
				t.Errorf("%s: err = %v, want ErrCreateContainerConfig naming the container and %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := strings.Join(envOf(t, b, containerInput{Pod: envPod(tc.c), Container: &tc.c}), ",")
		if got != tc.want {
			t.Errorf("%s: env %q, want %q", tc.name, got, tc.want)
		}
	}
}
