package kuberuntime

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit/internal/fsutil"
)

// DNS limits the kubelet applies to what it hands to the runtime (those of
// glibc's resolver and the API's validation).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchPathLen   = 253 // a DNS-1123 subdomain
	maxResolvConfBytes    = 10 << 20
	maxHostnameLen        = 63
	maxFQDNLen            = 64
	defaultResolvConf     = "/etc/resolv.conf"
)

// readResolvConfFile reads at most maxResolvConfBytes of a file.
func readResolvConfFile(path string) ([]byte, error) {
	data, err := fsutil.ReadAtMost(path, maxResolvConfBytes+1)
	if err != nil {
		return nil, err
	}
	if len(data) > maxResolvConfBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxResolvConfBytes)
	}
	return data, nil
}

// parseResolvConf reads nameserver, search and options lines. The last
// search line wins; "." and trailing dots are dropped from search domains;
// an option seen again replaces the earlier one of the same name in place.
func parseResolvConf(data []byte) (servers, searches, options []string, err error) {
	servers, searches, options = []string{}, []string{}, []string{}
	var errs []error
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) < 2 {
				errs = append(errs, errors.New("resolv.conf: nameserver line without an address"))
				continue
			}
			servers = append(servers, f[1])
		case "search":
			searches = []string{}
			for _, s := range f[1:] {
				if s != "." {
					searches = append(searches, strings.TrimSuffix(s, "."))
				}
			}
		case "options":
			options = mergeOptionStrings(options, f[1:])
		}
	}
	return servers, searches, options, errors.Join(errs...)
}

func optionName(o string) string {
	name, _, _ := strings.Cut(o, ":")
	return name
}

// mergeOptionStrings adds "name[:value]" options; a later option with the
// same name replaces the earlier one where it stood.
func mergeOptionStrings(opts []string, add []string) []string {
	for _, o := range add {
		replaced := false
		for i := range opts {
			if optionName(opts[i]) == optionName(o) {
				opts[i] = o
				replaced = true
				break
			}
		}
		if !replaced {
			opts = append(opts, o)
		}
	}
	return opts
}

func omitDuplicates(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// hostDNS reads the configured host resolv.conf ("-" none, "" default).
func (b *configBuilder) hostDNS() (*runtimeapi.DNSConfig, error) {
	path := b.cfg.DNS.ResolvConf
	if path == "-" {
		return &runtimeapi.DNSConfig{}, nil
	}
	if path == "" {
		path = defaultResolvConf
	}
	read := b.readFile
	cached := read == nil // an injected reader (tests) is asked every time
	var stamp fsutil.Stamp
	if cached {
		// Every sandbox needs the host's resolv.conf: it is parsed again
		// only when its stamp moved (one stat instead of open, read and
		// close per pod).
		fi, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("read host resolv.conf: %w", err)
		}
		stamp = fsutil.StampOf(fi)
		if dns := b.resolv.get(path, stamp); dns != nil {
			return dns, nil
		}
		read = readResolvConfFile
	}
	data, err := read(path)
	if err != nil {
		return nil, fmt.Errorf("read host resolv.conf: %w", err)
	}
	if len(data) > maxResolvConfBytes {
		return nil, fmt.Errorf("host resolv.conf %s is larger than %d bytes", path, maxResolvConfBytes)
	}
	servers, searches, options, err := parseResolvConf(data)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	dns := &runtimeapi.DNSConfig{Servers: servers, Searches: searches, Options: options}
	if cached && stamp.Trusted(b.cfg.Clock.Now(), resolvConfWindow) {
		b.resolv.put(path, stamp, dns)
	}
	return dns, nil
}

// resolvConfWindow is how long before it is read the host resolv.conf must
// have last changed for its stamp to vouch for its content (fsutil.Stamp).
const resolvConfWindow = time.Second

// resolvCache holds the host resolv.conf as last parsed, with the stamp of
// the file it came from. Its zero value is empty.
type resolvCache struct {
	mu    sync.Mutex
	path  string
	stamp fsutil.Stamp
	dns   *runtimeapi.DNSConfig
}

// get returns a copy of the parsed file if it came from path with stamp.
func (c *resolvCache) get(path string, stamp fsutil.Stamp) *runtimeapi.DNSConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dns == nil || c.path != path || c.stamp != stamp {
		return nil
	}
	return cloneDNS(c.dns)
}

// put keeps a copy of dns, parsed from path with stamp.
func (c *resolvCache) put(path string, stamp fsutil.Stamp, dns *runtimeapi.DNSConfig) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.path, c.stamp, c.dns = path, stamp, cloneDNS(dns)
}

func cloneDNS(d *runtimeapi.DNSConfig) *runtimeapi.DNSConfig {
	return &runtimeapi.DNSConfig{Servers: slices.Clone(d.Servers), Searches: slices.Clone(d.Searches), Options: slices.Clone(d.Options)}
}

// podDNS builds the sandbox DNS config for the pod's dnsPolicy:
//   - None: only spec.dnsConfig.
//   - ClusterFirst (not host network) and ClusterFirstWithHostNet: the
//     cluster DNS servers, <ns>.svc.<domain>, svc.<domain>, <domain> then
//     the host's search domains, options ndots:5; without ClusterDNS it falls
//     back to Default (as the kubelet does, which also raises an event).
//   - Default, and ClusterFirst with host network: the host's resolv.conf
//     (with resolv.conf disabled: 127.0.0.1 and search ".").
//
// Then spec.dnsConfig is merged in and the result is cut to 3 nameservers,
// 32 search domains of at most 253 characters and 2048 characters in all.
// An unknown policy is treated as ClusterFirst.
func (b *configBuilder) podDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	host, err := b.hostDNS()
	if err != nil {
		return nil, err
	}
	dns := host
	cluster := true
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		dns = &runtimeapi.DNSConfig{}
		cluster = false
	case v1.DNSDefault:
		cluster = false
	case v1.DNSClusterFirst, "":
		cluster = !pod.Spec.HostNetwork
	}
	if pod.Spec.DNSPolicy != v1.DNSNone {
		if cluster && len(b.cfg.DNS.ClusterDNS) > 0 {
			dns.Servers = append([]string(nil), b.cfg.DNS.ClusterDNS...)
			if d := b.cfg.DNS.ClusterDomain; d != "" {
				dns.Searches = omitDuplicates(append([]string{pod.Namespace + ".svc." + d, "svc." + d, d}, dns.Searches...))
			}
			dns.Options = []string{"ndots:5"}
		} else if b.cfg.DNS.ResolvConf == "-" {
			dns.Servers = []string{"127.0.0.1"}
			dns.Searches = []string{"."}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		dns.Servers = omitDuplicates(append(dns.Servers, dc.Nameservers...))
		dns.Searches = omitDuplicates(append(dns.Searches, dc.Searches...))
		for _, o := range dc.Options {
			s := o.Name
			if o.Value != nil && *o.Value != "" {
				s += ":" + *o.Value
			}
			dns.Options = mergeOptionStrings(dns.Options, []string{s})
		}
	}
	if len(dns.Servers) > maxDNSNameservers {
		dns.Servers = dns.Servers[:maxDNSNameservers]
	}
	dns.Searches = fitSearches(dns.Searches)
	return dns, nil
}

// fitSearches applies the search-line limits: at most 32 domains, none longer
// than 253 characters (dropped), and the joined line at most 2048 characters
// (domains dropped from the end).
func fitSearches(s []string) []string {
	if len(s) > maxDNSSearchPaths {
		s = s[:maxDNSSearchPaths]
	}
	out := make([]string, 0, len(s))
	total := -1
	for _, d := range s {
		if len(d) > maxDNSSearchPathLen {
			continue
		}
		out = append(out, d)
		total += len(d) + 1
	}
	for total > maxDNSSearchListChars && len(out) > 0 {
		total -= len(out[len(out)-1]) + 1
		out = out[:len(out)-1]
	}
	return out
}

// truncateHostname cuts a hostname to 63 characters, then trims trailing
// '-' and '.'.
func truncateHostname(podName, h string) (string, error) {
	if len(h) <= maxHostnameLen {
		return h, nil
	}
	t := strings.TrimRight(h[:maxHostnameLen], "-.")
	if t == "" {
		return "", fmt.Errorf("%w: pod %q: hostname %q is invalid", ErrInvalidPod, podName, h)
	}
	return t, nil
}

// podHostname is the sandbox hostname of a pod that is not on the host
// network: spec.hostnameOverride if set; else spec.hostname or the pod name,
// truncated to 63 characters; with setHostnameAsFQDN and a subdomain the
// FQDN <hostname>.<subdomain>.<ns>.svc.<clusterDomain> (at most 64 chars).
func (b *configBuilder) podHostname(pod *v1.Pod) (string, error) {
	if o := pod.Spec.HostnameOverride; o != nil {
		if msgs := validation.IsDNS1123Subdomain(*o); len(msgs) > 0 {
			return "", fmt.Errorf("%w: spec.hostnameOverride %q: %s", ErrInvalidPod, *o, strings.Join(msgs, "; "))
		}
		return truncateHostname(pod.Name, *o)
	}
	h := pod.Name
	if pod.Spec.Hostname != "" {
		if msgs := validation.IsDNS1123Label(pod.Spec.Hostname); len(msgs) > 0 {
			return "", fmt.Errorf("%w: spec.hostname %q: %s", ErrInvalidPod, pod.Spec.Hostname, strings.Join(msgs, "; "))
		}
		h = pod.Spec.Hostname
	}
	h, err := truncateHostname(pod.Name, h)
	if err != nil {
		return "", err
	}
	if pod.Spec.Subdomain == "" {
		return h, nil
	}
	if msgs := validation.IsDNS1123Label(pod.Spec.Subdomain); len(msgs) > 0 {
		return "", fmt.Errorf("%w: spec.subdomain %q: %s", ErrInvalidPod, pod.Spec.Subdomain, strings.Join(msgs, "; "))
	}
	if pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return h, nil
	}
	fqdn := fmt.Sprintf("%s.%s.%s.svc.%s", h, pod.Spec.Subdomain, pod.Namespace, b.cfg.DNS.ClusterDomain)
	if len(fqdn) > maxFQDNLen {
		return "", fmt.Errorf("%w: spec.setHostnameAsFQDN: FQDN %s is %d characters, more than %d", ErrInvalidPod, fqdn, len(fqdn), maxFQDNLen)
	}
	return fqdn, nil
}
