package podconfig

import (
	"bytes"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
)

const staticYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  containers:
  - name: app
    image: nginx
    ports:
    - containerPort: 80
    resources:
      limits:
        cpu: 500m
`

func fileOpts(path string) StaticPodOptions {
	return StaticPodOptions{NodeName: "Node-A", Source: kubetypes.SourceFile, Origin: path, AddNoExecuteToleration: true}
}

func TestDecodeStaticPodDefaults(t *testing.T) {
	pods, err := DecodeStaticPods([]byte(staticYAML), fileOpts("/etc/pods/web.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 {
		t.Fatalf("got %d pods", len(pods))
	}
	p := pods[0]
	if p.Name != "web-node-a" {
		t.Errorf("name %q, want web-node-a (lowercased node suffix)", p.Name)
	}
	if p.Namespace != "default" || p.Spec.NodeName != "Node-A" {
		t.Errorf("namespace %q nodeName %q", p.Namespace, p.Spec.NodeName)
	}
	if len(p.UID) != 32 || p.Annotations[kubetypes.ConfigHashAnnotation] != string(p.UID) {
		t.Errorf("uid %q hash annotation %q", p.UID, p.Annotations[kubetypes.ConfigHashAnnotation])
	}
	if p.Status.Phase != v1.PodPending {
		t.Errorf("phase %q", p.Status.Phase)
	}
	if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Operator != v1.TolerationOpExists || p.Spec.Tolerations[0].Effect != v1.TaintEffectNoExecute {
		t.Errorf("tolerations %+v", p.Spec.Tolerations)
	}
	c := p.Spec.Containers[0]
	if c.ImagePullPolicy != v1.PullAlways || c.TerminationMessagePath != v1.TerminationMessagePathDefault ||
		c.TerminationMessagePolicy != v1.TerminationMessageReadFile || c.Ports[0].Protocol != v1.ProtocolTCP {
		t.Errorf("container defaults: %+v", c)
	}
	if q := c.Resources.Requests[v1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("requests not copied from limits: %v", c.Resources.Requests)
	}
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways || p.Spec.DNSPolicy != v1.DNSClusterFirst ||
		*p.Spec.TerminationGracePeriodSeconds != 30 {
		t.Errorf("spec defaults: %+v", p.Spec)
	}

	// Stable UID; differs by path, node, and source kind.
	again, _ := DecodeStaticPods([]byte(staticYAML), fileOpts("/etc/pods/web.yaml"))
	other, _ := DecodeStaticPods([]byte(staticYAML), fileOpts("/etc/pods/other.yaml"))
	url, _ := DecodeStaticPods([]byte(staticYAML), StaticPodOptions{NodeName: "node-a", Source: kubetypes.SourceHTTP, Origin: "http://x/"})
	if again[0].UID != p.UID || other[0].UID == p.UID || url[0].UID == p.UID {
		t.Errorf("uids: %s %s %s %s", p.UID, again[0].UID, other[0].UID, url[0].UID)
	}
	if len(url[0].Spec.Tolerations) != 0 {
		t.Errorf("URL pod got a toleration")
	}
}

func TestStaticPodNameGenerate(t *testing.T) {
	for _, tc := range []struct{ name, node, want string }{
		{"etcd", "NODE", "etcd-node"},
		{"etcd", "node", "etcd-node"},
		{"Foo", "Bar-Baz", "Foo-bar-baz"},
	} {
		if got := StaticPodName(tc.name, tc.node); got != tc.want {
			t.Errorf("StaticPodName(%q,%q)=%q want %q", tc.name, tc.node, got, tc.want)
		}
	}
}

func TestDecodeKeepsGivenUIDAndPullPolicy(t *testing.T) {
	js := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","uid":"my-uid","namespace":"ns"},
	"spec":{"containers":[{"name":"c","image":"reg:5000/img:1.2"}]}}`
	pods, err := DecodeStaticPods([]byte(js), StaticPodOptions{NodeName: "n", Source: kubetypes.SourceHTTP, Origin: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if pods[0].UID != "my-uid" || pods[0].Namespace != "ns" || pods[0].Spec.Containers[0].ImagePullPolicy != v1.PullIfNotPresent {
		t.Errorf("%+v", pods[0])
	}
}

func TestDecodePodList(t *testing.T) {
	for _, kind := range []string{"PodList", "List"} {
		js := `{"apiVersion":"v1","kind":"` + kind + `","items":[
		{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i:1"}]}},
		{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b"},"spec":{"containers":[{"name":"c","image":"i:1"}]}}]}`
		pods, err := DecodeStaticPods([]byte(js), StaticPodOptions{NodeName: "n", Source: kubetypes.SourceHTTP, Origin: "u"})
		if err != nil {
			t.Fatal(kind, err)
		}
		if len(pods) != 2 || pods[0].Name != "a-n" || pods[1].Name != "b-n" || pods[0].UID == pods[1].UID {
			t.Errorf("%s: %v", kind, pods)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []string
		is         []error
	}{
		{"yaml syntax", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [a\n  x: : y\n", []string{"/p/bad.yaml", "line"}, nil},
		{"json syntax", "{\"apiVersion\":\"v1\",\n\"kind\":\"Pod\",\n\"metadata\": {,}}", []string{"/p/bad.yaml", "line 3"}, nil},
		{"empty", "  \n# comment only\n", []string{"/p/bad.yaml"}, []error{ErrEmptyManifest}},
		{"no name", "apiVersion: v1\nkind: Pod\nspec:\n  containers: [{name: a, image: b}]\n", []string{"metadata.name"}, nil},
		{"bad container name", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: A_B, image: b}]\n", []string{"spec.containers[0].name"}, []error{ErrInvalidPod}},
		{"dup container", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  initContainers: [{name: a, image: b}]\n  containers: [{name: a, image: b}]\n", []string{"spec.containers[0].name", "Duplicate"}, []error{ErrInvalidPod}},
		{"no image", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a}]\n", []string{"spec.containers[0].image"}, nil},
		{"bad port", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, ports: [{containerPort: 70000}]}]\n", []string{"spec.containers[0].ports[0].containerPort"}, nil},
		{"requests>limits", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]\n", []string{"spec.containers[0].resources.requests[cpu]"}, nil},
		{"bad quantity", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, resources: {limits: {cpu: lots}}}]\n", []string{"/p/bad.yaml", "quantities"}, nil},
		{"mount unknown volume", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /x}]}]\n", []string{"spec.containers[0].volumeMounts[0].name"}, nil},
		{"two sources", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, emptyDir: {}, hostPath: {path: /a}}]\n  containers: [{name: a, image: b}]\n", []string{"spec.volumes[0]"}, nil},
		{"dup volume", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, emptyDir: {}}, {name: v, emptyDir: {}}]\n  containers: [{name: a, image: b}]\n", []string{"spec.volumes[1].name"}, nil},
		{"restart policy", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  restartPolicy: Sometimes\n  containers: [{name: a, image: b}]\n", []string{"spec.restartPolicy"}, nil},
		{"dns policy", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  dnsPolicy: Weird\n  containers: [{name: a, image: b}]\n", []string{"spec.dnsPolicy"}, nil},
		{"secret volume", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, secret: {secretName: s}}]\n  containers: [{name: a, image: b}]\n", []string{"static pods may not reference secrets"}, nil},
		{"service account", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  serviceAccountName: sa\n  containers: [{name: a, image: b}]\n", []string{"static pods may not reference serviceaccounts"}, nil},
		{"env configmap", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b, env: [{name: E, valueFrom: {configMapKeyRef: {name: c, key: k}}}]}]\n", []string{"spec.containers[0].env[0].valueFrom.configMapKeyRef", "configmaps"}, nil},
		{"projected token", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, projected: {sources: [{serviceAccountToken: {path: t}}]}}]\n  containers: [{name: a, image: b}]\n", []string{"serviceaccounts (via projected volumes)"}, nil},
		{"pvc", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, persistentVolumeClaim: {claimName: c}}]\n  containers: [{name: a, image: b}]\n", []string{"persistentvolumeclaims"}, nil},
		{"csi", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, csi: {driver: d}}]\n  containers: [{name: a, image: b}]\n", []string{"csidrivers"}, nil},
		{"uid slash", "apiVersion: v1\nkind: Pod\nmetadata: {name: x, uid: ../../etc}\nspec:\n  containers: [{name: a, image: b}]\n", []string{"metadata.uid"}, nil},
		{"name slash", "apiVersion: v1\nkind: Pod\nmetadata: {name: a/b}\nspec:\n  containers: [{name: a, image: b}]\n", []string{"metadata.name"}, nil},
		{"wrong kind", "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n", []string{"Service"}, nil},
		{"wrong version", "apiVersion: v2\nkind: Pod\nmetadata: {name: x}\n", []string{"apiVersion"}, nil},
		{"list with service", `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service"}]}`, []string{"items[0]"}, nil},
		{"subpath escape", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  volumes: [{name: v, emptyDir: {}}]\n  containers: [{name: a, image: b, volumeMounts: [{name: v, mountPath: /x, subPath: ../../etc}]}]\n", []string{"subPath"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeStaticPods([]byte(tc.data), fileOpts("/p/bad.yaml"))
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidManifest) {
				t.Errorf("not ErrInvalidManifest: %v", err)
			}
			if !strings.Contains(err.Error(), "/p/bad.yaml") {
				t.Errorf("error does not name the origin: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for _, e := range tc.is {
				if !errors.Is(err, e) {
					t.Errorf("error %v is not %v", err, e)
				}
			}
		})
	}
}

func TestDecodeYAMLSyntaxLine(t *testing.T) {
	data := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n\tbad: tab\n"
	_, err := DecodeStaticPods([]byte(data), fileOpts("/p/x.yaml"))
	if err == nil || !regexp.MustCompile(`line [45]:`).MatchString(err.Error()) {
		t.Fatalf("want the line in the error, got %v", err)
	}
}

func TestDecodeLimits(t *testing.T) {
	big := bytes.Repeat([]byte("#"), MaxManifestSize+1)
	if _, err := DecodeStaticPods(big, fileOpts("/big")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("10 MiB + 1: %v", err)
	}
	if _, err := DecodeStaticPods([]byte(aliasBomb()), fileOpts("/bomb")); !errors.Is(err, ErrTooLarge) {
		t.Errorf("alias bomb: %v", err)
	}
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	if _, err := DecodeStaticPods([]byte(deep), fileOpts("/deep")); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep yaml flow: %v", err)
	}
	deepJSON := `{"a":` + strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 201)
	if _, err := DecodeStaticPods([]byte(deepJSON), fileOpts("/deep")); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep json: %v", err)
	}
	var b strings.Builder
	for i := 0; i < 150; i++ {
		b.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	if _, err := DecodeStaticPods([]byte(b.String()), fileOpts("/deep")); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep yaml block: %v", err)
	}
}

// aliasBomb is the classic "billion laughs" in YAML.
func aliasBomb() string {
	var b strings.Builder
	b.WriteString("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n")
	prev := "a"
	for i := 0; i < 9; i++ {
		n := string(rune('b' + i))
		b.WriteString(n + ": &" + n + " [")
		for j := 0; j < 9; j++ {
			if j > 0 {
				b.WriteString(",")
			}
			b.WriteString("*" + prev)
		}
		b.WriteString("]\n")
		prev = n
	}
	return b.String()
}
