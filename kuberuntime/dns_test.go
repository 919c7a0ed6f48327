package kuberuntime

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const hostResolvConf = `# host
nameserver 192.168.1.1
nameserver 192.168.1.2
search corp.example lab.example.
options ndots:2 timeout:1
options ndots:3
`

func dnsBuilder(cfg DNSConfig, resolv string) *configBuilder {
	return &configBuilder{cfg: &Config{DNS: cfg}, readFile: func(path string) ([]byte, error) {
		if path != "/etc/resolv.conf" && path != "/custom/resolv.conf" {
			return nil, fmt.Errorf("unexpected path %s", path)
		}
		return []byte(resolv), nil
	}}
}

func dnsPod(policy v1.DNSPolicy, hostNet bool, dc *v1.PodDNSConfig) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metaFor("web", "ns1", "uid-1"), Spec: v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc}}
	return p
}

func TestCfgPodDNS(t *testing.T) {
	cluster := DNSConfig{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"}
	two := "2"
	for _, tc := range []struct {
		name                      string
		cfg                       DNSConfig
		pod                       *v1.Pod
		servers, searches, option string
	}{
		{"cluster first", cluster, dnsPod(v1.DNSClusterFirst, false, nil),
			"10.96.0.10", "ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example", "ndots:5"},
		{"empty policy is cluster first", cluster, dnsPod("", false, nil),
			"10.96.0.10", "ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example", "ndots:5"},
		{"cluster first on host network uses host", cluster, dnsPod(v1.DNSClusterFirst, true, nil),
			"192.168.1.1 192.168.1.2", "corp.example lab.example", "ndots:3 timeout:1"},
		{"cluster first with host net", cluster, dnsPod(v1.DNSClusterFirstWithHostNet, true, nil),
			"10.96.0.10", "ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example", "ndots:5"},
		{"default", cluster, dnsPod(v1.DNSDefault, false, nil),
			"192.168.1.1 192.168.1.2", "corp.example lab.example", "ndots:3 timeout:1"},
		{"cluster first without cluster DNS falls back", DNSConfig{ClusterDomain: "cluster.local"}, dnsPod(v1.DNSClusterFirst, false, nil),
			"192.168.1.1 192.168.1.2", "corp.example lab.example", "ndots:3 timeout:1"},
		{"cluster first, no cluster domain", DNSConfig{ClusterDNS: []string{"10.0.0.10"}}, dnsPod(v1.DNSClusterFirst, false, nil),
			"10.0.0.10", "corp.example lab.example", "ndots:5"},
		{"none", cluster, dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{
			Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}}),
			"1.1.1.1", "a.example", "ndots:2 edns0"},
		{"none without dnsConfig", cluster, dnsPod(v1.DNSNone, false, nil), "", "", ""},
		{"merge into cluster first", cluster, dnsPod(v1.DNSClusterFirst, false, &v1.PodDNSConfig{
			Nameservers: []string{"10.96.0.10", "8.8.8.8", "9.9.9.9", "1.1.1.1"}, Searches: []string{"cluster.local", "x.example"},
			Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "single-request"}}}),
			"10.96.0.10 8.8.8.8 9.9.9.9", "ns1.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example x.example", "ndots:2 single-request"},
		{"resolv.conf disabled, default", DNSConfig{ResolvConf: "-"}, dnsPod(v1.DNSDefault, false, nil), "127.0.0.1", ".", ""},
		{"resolv.conf disabled, cluster first", DNSConfig{ResolvConf: "-", ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "c.local"},
			dnsPod(v1.DNSClusterFirst, false, nil), "10.96.0.10", "ns1.svc.c.local svc.c.local c.local", "ndots:5"},
		{"custom resolv.conf", DNSConfig{ResolvConf: "/custom/resolv.conf"}, dnsPod(v1.DNSDefault, false, nil),
			"192.168.1.1 192.168.1.2", "corp.example lab.example", "ndots:3 timeout:1"},
	} {
		dns, err := dnsBuilder(tc.cfg, hostResolvConf).podDNS(tc.pod)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s := strings.Join(dns.Servers, " "); s != tc.servers {
			t.Errorf("%s: servers %q, want %q", tc.name, s, tc.servers)
		}
		if s := strings.Join(dns.Searches, " "); s != tc.searches {
			t.Errorf("%s: searches %q, want %q", tc.name, s, tc.searches)
		}
		if s := strings.Join(dns.Options, " "); s != tc.option {
			t.Errorf("%s: options %q, want %q", tc.name, s, tc.option)
		}
	}
}

func TestCfgPodDNSReadError(t *testing.T) {
	b := &configBuilder{cfg: &Config{}, readFile: func(string) ([]byte, error) { return nil, errors.New("no file") }}
	if _, err := b.podDNS(dnsPod(v1.DNSDefault, false, nil)); err == nil || !strings.Contains(err.Error(), "no file") {
		t.Errorf("err = %v", err)
	}
	// An I/O failure is not blamed on the pod.
	if _, err := b.sandboxConfig(t.Context(), dnsPod(v1.DNSDefault, false, nil), 0); err == nil || errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), "no file") {
		t.Errorf("sandboxConfig err = %v, want the read error, not ErrInvalidPod", err)
	}
	b.readFile = func(string) ([]byte, error) { return []byte("nameserver\n"), nil }
	if _, err := b.podDNS(dnsPod(v1.DNSDefault, false, nil)); err == nil {
		t.Error("nameserver without address: want error")
	}
}

func TestCfgDNSSearchLimits(t *testing.T) {
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("d%d.example", i))
	}
	long := strings.Repeat("a", 254)
	b := dnsBuilder(DNSConfig{ResolvConf: "-"}, "")
	dns, err := b.podDNS(dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Searches: append([]string{long}, many...)}))
	if err != nil {
		t.Fatal(err)
	}
	// 32 kept first, then the over-long one dropped: 31 remain.
	if len(dns.Searches) != 31 || dns.Searches[0] != "d0.example" || dns.Searches[30] != "d30.example" {
		t.Errorf("searches: %d %v", len(dns.Searches), dns.Searches)
	}

	// 2048 characters in all: cut from the end.
	var big []string
	for i := range 20 {
		big = append(big, fmt.Sprintf("%03d", i)+strings.Repeat("b", 200))
	}
	dns, _ = b.podDNS(dnsPod(v1.DNSNone, false, &v1.PodDNSConfig{Searches: big}))
	if n := len(strings.Join(dns.Searches, " ")); n > 2048 || len(dns.Searches) != 10 {
		t.Errorf("search line %d chars, %d domains", n, len(dns.Searches))
	}
}

func TestCfgParseResolvConf(t *testing.T) {
	s, q, o, err := parseResolvConf([]byte("search a b\nsearch c. .\n; comment\n#x\nnameserver 1.2.3.4 extra\noptions rotate\n"))
	if err != nil || strings.Join(s, ",") != "1.2.3.4" || strings.Join(q, ",") != "c" || strings.Join(o, ",") != "rotate" {
		t.Errorf("got %v %v %v %v", s, q, o, err)
	}
}

func TestCfgHostname(t *testing.T) {
	yes := true
	long := strings.Repeat("a", 60) + "-b.cdef"
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		domain  string
		want    string
		wantErr bool
	}{
		{"pod name", &v1.Pod{ObjectMeta: metaFor("web-0", "ns", "u")}, "", "web-0", false},
		{"spec hostname", &v1.Pod{ObjectMeta: metaFor("web-0", "ns", "u"), Spec: v1.PodSpec{Hostname: "db"}}, "", "db", false},
		{"long name truncated", &v1.Pod{ObjectMeta: metaFor(strings.Repeat("x", 70), "ns", "u")}, "", strings.Repeat("x", 63), false},
		{"truncation trims - and .", &v1.Pod{ObjectMeta: metaFor(strings.Repeat("a", 61)+"-.bbb", "ns", "u")}, "", strings.Repeat("a", 61), false},
		{"truncation of", &v1.Pod{ObjectMeta: metaFor(long, "ns", "u")}, "", strings.Repeat("a", 60) + "-b", false},
		{"subdomain without FQDN", &v1.Pod{ObjectMeta: metaFor("web-0", "ns", "u"), Spec: v1.PodSpec{Subdomain: "svc1"}}, "cluster.local", "web-0", false},
		{"FQDN", &v1.Pod{ObjectMeta: metaFor("web-0", "ns", "u"), Spec: v1.PodSpec{Subdomain: "svc1", SetHostnameAsFQDN: &yes}}, "cluster.local",
			"web-0.svc1.ns.svc.cluster.local", false},
		{"FQDN too long", &v1.Pod{ObjectMeta: metaFor(strings.Repeat("w", 50), "ns", "u"), Spec: v1.PodSpec{Subdomain: "svc1", SetHostnameAsFQDN: &yes}}, "cluster.local", "", true},
		{"bad hostname", &v1.Pod{ObjectMeta: metaFor("web", "ns", "u"), Spec: v1.PodSpec{Hostname: "Bad_Name"}}, "", "", true},
		{"bad subdomain", &v1.Pod{ObjectMeta: metaFor("web", "ns", "u"), Spec: v1.PodSpec{Subdomain: "a.b"}}, "", "", true},
		{"override", &v1.Pod{ObjectMeta: metaFor("web", "ns", "u"), Spec: v1.PodSpec{Hostname: "h", HostnameOverride: ptrTo("my.host.example")}}, "", "my.host.example", false},
		{"bad override", &v1.Pod{ObjectMeta: metaFor("web", "ns", "u"), Spec: v1.PodSpec{HostnameOverride: ptrTo("UP")}}, "", "", true},
	} {
		b := &configBuilder{cfg: &Config{DNS: DNSConfig{ClusterDomain: tc.domain}}}
		got, err := b.podHostname(tc.pod)
		if tc.wantErr {
			if !errors.Is(err, ErrInvalidPod) {
				t.Errorf("%s: err = %v, want ErrInvalidPod", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
