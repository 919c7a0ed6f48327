package nodekit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/podstatus"
)

// envRecorder is the fake runtime keeping the environment each container
// was created with.
type envRecorder struct {
	*fake.Runtime
	mu   sync.Mutex
	envs map[string]map[string]string // container name -> env
}

func (r *envRecorder) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) (string, error) {
	env := map[string]string{}
	for _, kv := range cfg.GetEnvs() {
		env[kv.Key] = string(kv.Value)
	}
	r.mu.Lock()
	r.envs[cfg.GetMetadata().GetName()] = env
	r.mu.Unlock()
	return r.Runtime.CreateContainer(ctx, sb, cfg, sbCfg)
}

func (r *envRecorder) env(container string) map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.envs[container]
}

// TestNodeIPsInPodStatus: with WithNodeIPs every pod's status has hostIP
// and hostIPs, a host-network pod (for which the runtime reports no IP, as
// containerd) gets the node's IPs as its pod IPs, a pod with its own
// network keeps its own, and the env fieldRefs status.hostIP(s) resolve to
// the node's IPs. The cluster's NodeIPs are used when WithNodeIPs is not
// given.
func TestNodeIPsInPodStatus(t *testing.T) {
	defer goleak.VerifyNone(t)
	fieldEnv := func(name, path string) v1.EnvVar {
		return v1.EnvVar{Name: name, ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}
	}
	pod := func(name string, hostNetwork bool) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: v1.PodSpec{NodeName: "n", HostNetwork: hostNetwork, Containers: []v1.Container{{
				Name: name, Image: "busybox",
				Env: []v1.EnvVar{fieldEnv("HOST_IP", "status.hostIP"), fieldEnv("HOST_IPS", "status.hostIPs")},
			}}},
		}
	}
	for _, tc := range []struct {
		name     string
		withIPs  []string // WithNodeIPs
		cluster  []string // Cluster.NodeIPs
		wantHost []string
	}{
		{name: "WithNodeIPs dual-stack", withIPs: []string{"192.0.2.10", "2001:db8::10"}, cluster: []string{"198.51.100.1"}, wantHost: []string{"192.0.2.10", "2001:db8::10"}},
		{name: "WithNodeIPs IPv6 primary", withIPs: []string{"2001:db8::10"}, wantHost: []string{"2001:db8::10"}},
		{name: "Cluster.NodeIPs", cluster: []string{"198.51.100.1"}, wantHost: []string{"198.51.100.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := fake.New(fake.Config{Images: []string{"busybox"}})
			if err != nil {
				t.Fatal(err)
			}
			rt := &envRecorder{Runtime: f, envs: map[string]map[string]string{}}
			host, own := pod("host", true), pod("own", false)
			sink := podstatus.NewMemorySink()
			b := nodekit.NewBuilder().WithNodeName("n").WithRuntime(rt).WithRootDir(t.TempDir()).
				WithCluster(nodekit.Cluster{
					PodSource: func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
						return setSource{out: out, pods: []*v1.Pod{host, own}}, nil
					},
					StatusSink: sink,
					NodeIPs:    func() []string { return tc.cluster },
				})
			if tc.withIPs != nil {
				b.WithNodeIPs(tc.withIPs...)
			}
			agent, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- agent.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			agenttest.WaitUntil(t, 10*time.Second, sink.Changed(), "both pods Running", func() (bool, string) {
				h, _ := sink.Get(host.UID)
				o, _ := sink.Get(own.UID)
				return h.Phase == v1.PodRunning && o.Phase == v1.PodRunning, fmt.Sprint(h.Phase, o.Phase)
			})
			hostIPs := func(st v1.PodStatus) []string {
				var out []string
				for _, ip := range st.HostIPs {
					out = append(out, ip.IP)
				}
				return out
			}
			podIPs := func(st v1.PodStatus) []string {
				var out []string
				for _, ip := range st.PodIPs {
					out = append(out, ip.IP)
				}
				return out
			}
			for _, p := range []*v1.Pod{host, own} {
				st, _ := sink.Get(p.UID)
				if st.HostIP != tc.wantHost[0] || strings.Join(hostIPs(st), ",") != strings.Join(tc.wantHost, ",") {
					t.Errorf("%s: hostIP %q hostIPs %v, want %v", p.Name, st.HostIP, hostIPs(st), tc.wantHost)
				}
				env := rt.env(p.Name)
				if env["HOST_IP"] != tc.wantHost[0] || env["HOST_IPS"] != strings.Join(tc.wantHost, ",") {
					t.Errorf("%s: env HOST_IP=%q HOST_IPS=%q, want %v", p.Name, env["HOST_IP"], env["HOST_IPS"], tc.wantHost)
				}
			}
			st, _ := sink.Get(host.UID)
			if st.PodIP != tc.wantHost[0] || strings.Join(podIPs(st), ",") != strings.Join(tc.wantHost, ",") {
				t.Errorf("host-network pod: podIP %q podIPs %v, want the node's %v", st.PodIP, podIPs(st), tc.wantHost)
			}
			st, _ = sink.Get(own.UID)
			if st.PodIP == "" || st.PodIP == tc.wantHost[0] || len(st.PodIPs) != 1 {
				t.Errorf("pod with its own network: podIP %q podIPs %v, want its sandbox's", st.PodIP, podIPs(st))
			}
		})
	}
}

// TestWithNodeIPsRefusesBadAddress: WithNodeIPs takes at most one IP
// address per family; Build names each bad one.
func TestWithNodeIPsRefusesBadAddress(t *testing.T) {
	for _, tc := range []struct {
		ips  []string
		want string
	}{
		{[]string{"node1"}, `"node1" is not an IP address`},
		{[]string{"10.0.0.1/24"}, `"10.0.0.1/24" is not an IP address`},
		{[]string{"fe80::1%eth0"}, `"fe80::1%eth0" has a zone`},
		{[]string{"0.0.0.0"}, `"0.0.0.0" is the unspecified address`},
		{[]string{"10.0.0.1", "10.0.0.2"}, "same IP family"},
		{[]string{"10.0.0.1", "::1", "10.0.0.2"}, "3 addresses given"},
	} {
		_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
			WithNodeIPs(tc.ips...).Build()
		if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "WithNodeIPs") {
			t.Errorf("WithNodeIPs(%q): Build = %v, want ErrInvalidConfig with %q", tc.ips, err, tc.want)
		}
	}
	if _, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).
		WithNodeIPs("10.0.0.1", "2001:db8::1").Build(); err != nil {
		t.Fatalf("dual-stack WithNodeIPs: %v", err)
	}
}
