package kuberuntime

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func jsonSecret(name, data string) v1.Secret {
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Type:       v1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{v1.DockerConfigJsonKey: []byte(data)},
	}
}

func cfgSecret(name, data string) v1.Secret {
	return v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Type:       v1.SecretTypeDockercfg,
		Data:       map[string][]byte{v1.DockerConfigKey: []byte(data)},
	}
}

func users(t *testing.T, image string, secrets []v1.Secret) string {
	t.Helper()
	auths, err := (&configBuilder{cfg: &Config{}}).pullAuths(image, secrets)
	if err != nil {
		t.Fatalf("pullAuths(%s): %v", image, err)
	}
	var u []string
	for _, a := range auths {
		s := a.Username
		if a.IdentityToken != "" {
			s += "+id:" + a.IdentityToken
		}
		if a.RegistryToken != "" {
			s += "+reg:" + a.RegistryToken
		}
		u = append(u, s)
	}
	return strings.Join(u, ",")
}

func TestCfgPullAuthsMatching(t *testing.T) {
	secrets := []v1.Secret{
		jsonSecret("s1", `{"auths":{
			"https://index.docker.io/v1/": {"auth": "`+b64("hub:pw")+`"},
			"registry.example.com": {"username": "reg", "password": "pw"},
			"registry.example.com/team": {"username": "team", "password": "pw"},
			"registry.example.com/team/app": {"username": "app", "password": "pw"},
			"*.example.com": {"username": "glob", "password": "pw"},
			"registry.example.com:5000": {"username": "port", "password": "pw"},
			"https://quay.io/v2/org": {"identitytoken": "tok", "username": "quay"},
			"localhost:5000": {"registrytoken": "rt", "username": "local"}
		}}`),
		cfgSecret("s2", `{"registry.example.com": {"auth": "`+strings.TrimRight(b64("reg2:pw"), "=")+`"}, "docker.io/library": {"username": "lib", "password": "x"}}`),
	}
	for _, tc := range []struct{ image, want string }{
		{"nginx", "lib,hub"},
		{"nginx:1.27", "lib,hub"},
		{"library/nginx@sha256:0123", "lib,hub"},
		{"docker.io/library/nginx", "lib,hub"},
		{"index.docker.io/someone/app", "hub"},
		{"registry-1.docker.io/someone/app:v1", "hub"},
		{"registry.example.com/team/app:v2", "app,team,reg,reg2,glob"},
		{"registry.example.com/team/other", "team,reg,reg2,glob"},
		{"registry.example.com/teamwork/x", "team,reg,reg2,glob"}, // string prefix, as the kubelet matches
		{"registry.example.com/solo", "reg,reg2,glob"},
		{"other.example.com/x", "glob"},
		{"a.b.example.com/x", ""}, // a glob covers one label only
		{"registry.example.com:5000/x", "port"},
		{"registry.example.com:5001/x", ""},
		{"quay.io/org/app", "quay+id:tok"},
		{"quay.io/other/app", ""},
		{"localhost:5000/x", "local+reg:rt"},
		{"ghcr.io/x/y", ""},
	} {
		if got := users(t, tc.image, secrets); got != tc.want {
			t.Errorf("%s: auths %q, want %q", tc.image, got, tc.want)
		}
	}
}

func TestCfgPullAuthsSecrets(t *testing.T) {
	good := jsonSecret("good", `{"auths":{"reg.io":{"username":"u","password":"p"}}}`)
	badJSON := jsonSecret("bad-json", `{"auths":`)
	badAuth := jsonSecret("bad-auth", `{"auths":{"other.io":{"auth":"!!notbase64"}}}`)
	noColon := cfgSecret("no-colon", `{"other.io":{"auth":"`+b64("justuser")+`"}}`)
	opaque := v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "opaque"}, Type: v1.SecretTypeOpaque, Data: map[string][]byte{v1.DockerConfigJsonKey: []byte("junk")}}
	wrongKey := v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wrong"}, Type: v1.SecretTypeDockerConfigJson, Data: map[string][]byte{"x": []byte("junk")}}
	dup := jsonSecret("dup", `{"auths":{"https://reg.io/v1/":{"username":"u","password":"p"}}}`)
	b := &configBuilder{cfg: &Config{}}

	// A bad secret doesn't hide a good one.
	auths, err := b.pullAuths("reg.io/app", []v1.Secret{badJSON, badAuth, good, dup})
	if err != nil || len(auths) != 1 || auths[0].Username != "u" || auths[0].Password != "p" {
		t.Errorf("good after bad: %v %v", auths, err)
	}
	// Nothing matched and a bad secret: the error names every bad secret.
	_, err = b.pullAuths("other.io/app", []v1.Secret{good, badJSON, badAuth, noColon})
	if !errors.Is(err, ErrImagePull) || !strings.Contains(err.Error(), "ns/bad-json") ||
		!strings.Contains(err.Error(), "ns/bad-auth") || !strings.Contains(err.Error(), "ns/no-colon") {
		t.Errorf("bad secrets: %v", err)
	}
	// Other types and missing keys are ignored silently.
	if auths, err := b.pullAuths("reg.io/app", []v1.Secret{opaque, wrongKey}); auths != nil || err != nil {
		t.Errorf("ignored secrets: %v %v", auths, err)
	}
	if auths, err := b.pullAuths("reg.io/app", nil); auths != nil || err != nil {
		t.Errorf("no secrets: %v %v", auths, err)
	}
	// An unparsable image reference is an error.
	for _, img := range []string{"", "a b", strings.Repeat("x", 5000), "reg.io/"} {
		if _, err := b.pullAuths(img, []v1.Secret{good}); err == nil {
			t.Errorf("image %q: want error", img)
		}
	}
	// Oversized secret data is a named error.
	huge := jsonSecret("huge", `{"auths":{}}`+strings.Repeat(" ", maxPullSecretBytes))
	if _, err := b.pullAuths("x.io/a", []v1.Secret{huge}); err == nil || !strings.Contains(err.Error(), "ns/huge") {
		t.Errorf("huge: %v", err)
	}
}

func TestCfgImageRepo(t *testing.T) {
	for _, tc := range []struct{ in, host, port, repo string }{
		{"nginx", "docker.io", "", "/library/nginx"},
		{"user/app:tag", "docker.io", "", "/user/app"},
		{"localhost/app", "localhost", "", "/app"},
		{"localhost:5000/a/b:c@sha256:1", "localhost", "5000", "/a/b"},
		{"Reg.IO/a", "reg.io", "", "/a"},
		{"[::1]:5000/a", "::1", "5000", "/a"},
	} {
		h, p, r, ok := imageRepo(tc.in)
		if !ok || h != tc.host || p != tc.port || r != tc.repo {
			t.Errorf("imageRepo(%q) = %q %q %q %v", tc.in, h, p, r, ok)
		}
	}
}

func FuzzCfgPullAuths(f *testing.F) {
	f.Add("nginx", `{"auths":{"docker.io":{"auth":"`+b64("a:b")+`"}}}`, false)
	f.Add("reg.io:5000/a/b", `{"reg.io:5000/a":{"username":"u"}}`, true)
	f.Add("x/y", `{"auths":{"*.*":{"auth":"=="}}}`, false)
	f.Add("[::1]/a", `{"auths":{"[":{}}}`, false)
	f.Fuzz(func(t *testing.T, image, data string, dockercfg bool) {
		s := jsonSecret("s", data)
		if dockercfg {
			s = cfgSecret("s", data)
		}
		b := &configBuilder{cfg: &Config{}}
		auths, err := b.pullAuths(image, []v1.Secret{s, jsonSecret("ok", `{"auths":{"fuzz.invalid":{"username":"ok"}}}`)})
		if err != nil && len(auths) > 0 {
			t.Fatalf("both auths and error: %v", err)
		}
		for _, a := range auths {
			if a == nil {
				t.Fatal("nil auth")
			}
		}
	})
}
