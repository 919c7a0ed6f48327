package kuberuntime

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Bounds on pull-secret parsing.
const (
	maxPullSecretBytes   = 1 << 20 // a Secret's data is at most 1 MiB in the API
	maxImageRefLen       = 4096
	maxRegistryKeyLen    = 1024
	maxAuthEntriesPerSec = 4096
)

// dockerHubHosts are the names under which Docker Hub is known; an image or
// a credential for one of them is taken for all of them.
func dockerHubHosts() [3]string {
	return [3]string{"docker.io", "index.docker.io", "registry-1.docker.io"}
}

func isDockerHub(host string) bool {
	switch host {
	case "docker.io", "index.docker.io", "registry-1.docker.io":
		return true
	}
	return false
}

// dockerConfigEntry is one registry's credentials in a docker config.
type dockerConfigEntry struct {
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	Auth          string `json:"auth,omitempty"`
	Email         string `json:"email,omitempty"`
	IdentityToken string `json:"identitytoken,omitempty"`
	RegistryToken string `json:"registrytoken,omitempty"`
}

type dockerConfigJSON struct {
	Auths map[string]dockerConfigEntry `json:"auths"`
}

// decodeAuthField decodes the "auth" field: base64 (padded or not) of
// "user:password".
func decodeAuthField(s string) (user, pass string, err error) {
	s = strings.TrimSpace(s)
	var raw []byte
	if strings.HasSuffix(s, "=") {
		raw, err = base64.StdEncoding.DecodeString(s)
	} else {
		raw, err = base64.RawStdEncoding.DecodeString(s)
	}
	if err != nil {
		return "", "", fmt.Errorf("auth field is not base64: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", "", errors.New("auth field must be base64(username:password)")
	}
	return user, pass, nil
}

// registryKey is a parsed credential location: a host (maybe with a port,
// maybe with '*' globs per dot-separated part) and a path prefix.
type registryKey struct {
	raw  string
	host string
	port string
	path string // "" or "/..." ; the image path must start with it
}

// parseRegistryKey reads a docker config key such as "https://index.docker.io/v1/",
// "registry.example.com:5000/team" or "*.example.com". A /v1/ or /v2/ API
// prefix is dropped.
func parseRegistryKey(k string) (registryKey, bool) {
	if len(k) > maxRegistryKeyLen {
		return registryKey{}, false
	}
	s := strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	if s == "" || strings.ContainsAny(s, " \t\r\n?#@\\") {
		return registryKey{}, false
	}
	hostport, p, _ := strings.Cut(s, "/")
	if p != "" {
		p = "/" + p
	}
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "/" {
		p = ""
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	if host == "" {
		return registryKey{}, false
	}
	return registryKey{raw: k, host: strings.ToLower(host), port: port, path: p}, true
}

// imageRepo splits an image reference into registry host, port and the
// repository path ("/library/nginx"), dropping tag and digest. Docker Hub
// short names get host docker.io and the library/ prefix.
func imageRepo(image string) (host, port, repo string, ok bool) {
	if image == "" || len(image) > maxImageRefLen || strings.ContainsAny(image, " \t\r\n") {
		return "", "", "", false
	}
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	first, rest, hasSlash := strings.Cut(image, "/")
	if hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
		host, repo = first, rest
	} else {
		host, repo = "docker.io", image
	}
	if i := strings.LastIndexByte(repo, ':'); i >= 0 && !strings.Contains(repo[i:], "/") {
		repo = repo[:i]
	}
	if repo == "" {
		return "", "", "", false
	}
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = h, p
	}
	host = strings.ToLower(host)
	if isDockerHub(host) && port == "" && !strings.Contains(repo, "/") {
		repo = "library/" + repo
	}
	return host, port, "/" + repo, true
}

// hostGlobMatch matches a host against a pattern part by part ("*.io"
// matches "a.io" but not "a.b.io"), as the kubelet's keyring does.
func hostGlobMatch(pattern, host string) bool {
	pp, hp := strings.Split(pattern, "."), strings.Split(host, ".")
	if len(pp) != len(hp) {
		return false
	}
	for i := range pp {
		ok, err := path.Match(pp[i], hp[i])
		if err != nil || !ok {
			return false
		}
	}
	return true
}

// matches reports whether the credential location applies to the image:
// same port, host glob match (Docker Hub names are interchangeable) and the
// key's path a string prefix of the image's repository path (so, as in the
// kubelet, "reg.io/team" also covers "reg.io/teamwork/app").
func (k registryKey) matches(host, port, repo string) bool {
	if k.port != port || !strings.HasPrefix(repo, k.path) {
		return false
	}
	if isDockerHub(host) && port == "" {
		for _, h := range dockerHubHosts() {
			if hostGlobMatch(k.host, h) {
				return true
			}
		}
		return false
	}
	return hostGlobMatch(k.host, host)
}

type pullCred struct {
	key   registryKey
	order int // secret index, then entry order, for stable ties
	auth  *runtimeapi.AuthConfig
}

// credsFromSecret parses one pull secret; a secret of another type, or one
// without its data key, gives nothing and no error (as the kubelet ignores it).
func credsFromSecret(s *v1.Secret) (map[string]dockerConfigEntry, error) {
	var data []byte
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		data = s.Data[v1.DockerConfigJsonKey]
	case v1.SecretTypeDockercfg:
		data = s.Data[v1.DockerConfigKey]
	default:
		return nil, nil
	}
	if len(data) == 0 {
		return nil, nil
	}
	if len(data) > maxPullSecretBytes {
		return nil, fmt.Errorf("data is larger than %d bytes", maxPullSecretBytes)
	}
	var entries map[string]dockerConfigEntry
	if s.Type == v1.SecretTypeDockerConfigJson {
		var cfg dockerConfigJSON
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s is not a docker config: %w", v1.DockerConfigJsonKey, err)
		}
		entries = cfg.Auths
	} else if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%s is not a docker config: %w", v1.DockerConfigKey, err)
	}
	if len(entries) > maxAuthEntriesPerSec {
		return nil, fmt.Errorf("more than %d registries", maxAuthEntriesPerSec)
	}
	return entries, nil
}

// matchPullAuths returns the credentials of the pull secrets that apply to
// the image, most specific first:
//   - a longer path prefix first ("reg.io/team/app" before "reg.io/team"
//     before "reg.io");
//   - then an exact host before a glob host;
//   - then secret order, then registry key order.
//
// Docker Hub (docker.io, index.docker.io, registry-1.docker.io) names are
// one registry. Identical credentials are listed once.
//
// Bad secrets: a secret whose data can't be parsed (or whose auth field is
// not base64 user:password) is skipped, so it can't hide a good secret. If
// no credential matched and some secret was bad, the error (wrapping
// ErrImagePull and naming each bad secret) is returned, since the bad
// secret may have been the one meant for this image. An image reference that
// can't be parsed is an error too.
func matchPullAuths(image string, secrets []v1.Secret) ([]*runtimeapi.AuthConfig, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	host, port, repo, ok := imageRepo(image)
	if !ok {
		return nil, fmt.Errorf("%w: image reference %.100q can't be parsed", ErrImagePull, image)
	}
	var creds []pullCred
	var errs []error
	order := 0
	for si := range secrets {
		s := &secrets[si]
		entries, err := credsFromSecret(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("pull secret %s/%s: %w", s.Namespace, s.Name, err))
			continue
		}
		keys := make([]string, 0, len(entries))
		for k := range entries {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var secretCreds []pullCred
		var bad error
		for _, k := range keys {
			rk, ok := parseRegistryKey(k)
			if !ok {
				continue // an unusable location is ignored, as the kubelet does
			}
			e := entries[k]
			user, pass := e.Username, e.Password
			if e.Auth != "" {
				if user, pass, err = decodeAuthField(e.Auth); err != nil {
					bad = fmt.Errorf("pull secret %s/%s: registry %.100q: %w", s.Namespace, s.Name, k, err)
					break
				}
			}
			order++
			secretCreds = append(secretCreds, pullCred{key: rk, order: order, auth: &runtimeapi.AuthConfig{
				Username:      user,
				Password:      pass,
				IdentityToken: e.IdentityToken,
				RegistryToken: e.RegistryToken,
			}})
		}
		if bad != nil {
			errs = append(errs, bad)
			continue
		}
		creds = append(creds, secretCreds...)
	}

	var matched []pullCred
	for _, c := range creds {
		if c.key.matches(host, port, repo) {
			matched = append(matched, c)
		}
	}
	if len(matched) == 0 {
		if len(errs) > 0 {
			return nil, fmt.Errorf("%w: %w", ErrImagePull, errors.Join(errs...))
		}
		return nil, nil
	}
	sort.SliceStable(matched, func(i, j int) bool {
		a, b := matched[i], matched[j]
		if len(a.key.path) != len(b.key.path) {
			return len(a.key.path) > len(b.key.path)
		}
		ag, bg := strings.ContainsAny(a.key.host, "*?["), strings.ContainsAny(b.key.host, "*?[")
		if ag != bg {
			return !ag
		}
		return a.order < b.order
	})
	out := make([]*runtimeapi.AuthConfig, 0, len(matched))
	seen := map[[4]string]bool{}
	for _, c := range matched {
		id := [4]string{c.auth.Username, c.auth.Password, c.auth.IdentityToken, c.auth.RegistryToken}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, c.auth)
	}
	return out, nil
}
