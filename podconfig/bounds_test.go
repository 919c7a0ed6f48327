package podconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
)

// podYAML is a one-container pod with extra spec lines appended (indented
// two spaces) and extra container fields inside the flow mapping.
func podYAML(containerFields, specLines string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b" +
		containerFields + "}]\n" + specLines
}

func TestDecodeQuantityBounds(t *testing.T) {
	long := strings.Repeat("1", MaxQuantityLength)
	cases := []struct {
		name, data, path string
	}{
		{"negative exponent", podYAML(`, resources: {limits: {cpu: "1e-99999999"}}`, ""), "spec.containers[0].resources.limits.cpu"},
		{"positive exponent", podYAML(`, resources: {requests: {memory: "1e999999999"}}`, ""), "spec.containers[0].resources.requests.memory"},
		{"exponent beyond int64", podYAML(`, resources: {requests: {memory: "1E99999999999999999999999"}}`, ""), "spec.containers[0].resources.requests.memory"},
		{"json number", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"b","resources":{"limits":{"cpu":1e-99999999}}}]}}`,
			"spec.containers[0].resources.limits.cpu"},
		{"escaped key", `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"x"},"spec":{"containers":[{"name":"a","image":"b","resources":{"l\u0069mits":{"cpu":"1e-99999999"}}}]}}`,
			"spec.containers[0].resources.limits.cpu"},
		{"too long", podYAML(`, resources: {limits: {cpu: "`+long+`"}}`, ""), "spec.containers[0].resources.limits.cpu"},
		{"init container", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: [{name: a, image: b}]\n  initContainers: [{name: i, image: b, resources: {limits: {cpu: '1e-200'}}}]\n",
			"spec.initContainers[0].resources.limits.cpu"},
		{"pod resources", podYAML("", "  resources: {limits: {cpu: '1e-200'}}\n"), "spec.resources.limits.cpu"},
		{"overhead", podYAML("", "  overhead: {cpu: '1e-200'}\n"), "spec.overhead.cpu"},
		{"emptyDir sizeLimit", podYAML("", "  volumes: [{name: v, emptyDir: {sizeLimit: '1e-200'}}]\n"), "spec.volumes[0].emptyDir.sizeLimit"},
		{"env divisor", podYAML(`, env: [{name: X, valueFrom: {resourceFieldRef: {resource: limits.cpu, divisor: "1e-200"}}}]`, ""),
			"spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor"},
		{"claim template", podYAML("", "  volumes: [{name: v, ephemeral: {volumeClaimTemplate: {spec: {resources: {requests: {storage: '1e-200'}}}}}}]\n"),
			"spec.volumes[0].ephemeral.volumeClaimTemplate.spec.resources.requests.storage"},
		{"status", podYAML("", "status: {containerStatuses: [{name: a, allocatedResources: {cpu: '1e-200'}}]}\n"),
			"status.containerStatuses[0].allocatedResources.cpu"},
		{"pod list", "apiVersion: v1\nkind: PodList\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: a, image: b}]}}\n" +
			"- {apiVersion: v1, kind: Pod, metadata: {name: b}, spec: {containers: [{name: a, image: b, resources: {limits: {cpu: '1e-200'}}}]}}\n",
			"items[1].spec.containers[0].resources.limits.cpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeStaticPods([]byte(tc.data), fileOpts("/q.yaml"))
			if !errors.Is(err, ErrQuantityOutOfRange) || !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("want ErrQuantityOutOfRange, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.path+":") || !strings.Contains(err.Error(), "/q.yaml") {
				t.Fatalf("error should name %s and the origin: %v", tc.path, err)
			}
		})
	}
}

func TestDecodeQuantityWithinBounds(t *testing.T) {
	for _, q := range []string{"500m", "128Mi", "1e3", "1.5E9", "+2e+2", "1e-9", "0.1", "1e100", "1e-100", "7Ei", "100k"} {
		data := podYAML(`, resources: {limits: {cpu: "`+q+`"}, requests: {cpu: "0"}}`, "")
		pods, err := DecodeStaticPods([]byte(data), fileOpts("/ok.yaml"))
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		got := pods[0].Spec.Containers[0].Resources.Limits["cpu"]
		if want := resource.MustParse(q); got.Cmp(want) != 0 {
			t.Errorf("%s decoded as %s", q, got.String())
		}
	}
	// Exponent-looking text outside quantities is not a quantity.
	data := podYAML(`, env: [{name: X, value: "1e-99999999"}]`, "") +
		"metadata: {name: x, annotations: {limits: '1e-99999999'}}\n"
	if _, err := DecodeStaticPods([]byte(data), fileOpts("/ok.yaml")); err != nil {
		t.Fatalf("env value and annotation are not quantities: %v", err)
	}
}

func TestQuantityExponent(t *testing.T) {
	for s, want := range map[string]int64{"1e5": 5, "-1.5E-7": -7, "+.5e+3": 3} {
		if got, ok := quantityExponent(s); !ok || got != want {
			t.Errorf("%s: got %d %v, want %d", s, got, ok, want)
		}
	}
	if got, ok := quantityExponent("1e99999999999999999999"); !ok || got <= MaxQuantityExponent {
		t.Errorf("a huge exponent saturates above the bound, got %d %v", got, ok)
	}
	for _, s := range []string{"1E", "1Ei", "1e", "1e-", "500m", "1ex5", ""} {
		if got, ok := quantityExponent(s); ok {
			t.Errorf("%s: got exponent %d", s, got)
		}
	}
}

func TestDecodeCountBounds(t *testing.T) {
	repeat := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f(i))
		}
		return b.String()
	}
	many := func(n int, item string) string { return "[" + repeat(n, func(int) string { return item }) + "]" }
	cases := []struct {
		name, data, want string
	}{
		{"containers", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers: " +
			"[" + repeat(MaxContainersPerPod+1, func(i int) string { return fmt.Sprintf("{name: c%d, image: b}", i) }) + "]\n",
			"spec.containers: 1001 containers"},
		{"volumes", podYAML("", "  volumes: "+
			"["+repeat(MaxVolumesPerPod+1, func(i int) string { return fmt.Sprintf("{name: v%d, emptyDir: {}}", i) })+"]\n"),
			"spec.volumes: 1001 volumes"},
		{"env", podYAML(", env: "+many(MaxEnvPerContainer+1, "{name: A, value: b}"), ""), "spec.containers[0].env: 10001 env entries"},
		{"ports", podYAML(", ports: "+many(MaxPortsPerContainer+1, "{containerPort: 80}"), ""), "spec.containers[0].ports: 1001 ports"},
		{"mounts", podYAML(", volumeMounts: "+many(MaxMountsPerContainer+1, "{name: v, mountPath: /m}"), ""),
			"spec.containers[0].volumeMounts: 1001 volume mounts"},
		{"pods", "apiVersion: v1\nkind: PodList\nitems: " + many(MaxPodsPerManifest+1, "{}") + "\n", "items: more than 10000 pods"},
		{"pods json", `{"apiVersion":"v1","kind":"PodList","items":` + strings.ReplaceAll(many(MaxPodsPerManifest+1, "{}"), " ", "") + "}",
			"items: more than 10000 pods"},
		{"aliases", "a: &a x\nb: " + many(MaxManifestAliases+1, "*a") + "\n", "more than 10000 alias references"},
		{"values", "a: &a " + many(200, "1") + "\nb: " + many(MaxManifestNodes/200+1, "*a") + "\n", "more than 1048576 values"},
		{"values json", `{"a":` + strings.ReplaceAll(many(MaxManifestNodes, "1"), " ", "") + "}", "more than 1048576 values"},
		{"merge keys", mergeBomb(20), "more than 1048576 values"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeStaticPods([]byte(tc.data), fileOpts("/n.yaml"))
			if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("want ErrTooLarge, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error should say %q: %v", tc.want, err)
			}
		})
	}
}

// mergeBomb doubles a mapping at each level through "<<" merge keys.
func mergeBomb(levels int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 {k: v}\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "a%d: &a%d\n  <<: [*a%d, *a%d]\n  k%d: [*a%d, *a%d]\n", i, i, i-1, i-1, i, i-1, i-1)
	}
	return b.String()
}

func TestDecodeAtBoundsAccepted(t *testing.T) {
	data := podYAML(", env: ["+strings.TrimSuffix(strings.Repeat("{name: A, value: b}, ", MaxEnvPerContainer), ", ")+"]", "")
	if _, err := DecodeStaticPods([]byte(data), fileOpts("/n.yaml")); err != nil {
		t.Fatalf("%d env entries are allowed: %v", MaxEnvPerContainer, err)
	}
}

func TestValidationErrorMessageBounded(t *testing.T) {
	data := podYAML(", env: "+"["+strings.TrimSuffix(strings.Repeat("{name: 'A=B', value: b}, ", 5000), ", ")+"]", "")
	_, err := DecodeStaticPods([]byte(data), fileOpts("/n.yaml"))
	if !errors.Is(err, ErrInvalidPod) {
		t.Fatalf("want ErrInvalidPod, got %v", err)
	}
	if len(err.Error()) > 10_000 || !strings.Contains(err.Error(), "(and 4980 more)") {
		t.Fatalf("message of %d bytes: %.300s", len(err.Error()), err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errs) != 5000 {
		t.Fatalf("every problem is still in Errs")
	}
}

// BenchmarkDecodeHostileQuantity shows a refused quantity costs what a small
// manifest costs (parsing "1e-99999999" would take minutes).
func BenchmarkDecodeHostileQuantity(b *testing.B) {
	data := []byte(podYAML(`, resources: {limits: {cpu: "1e-99999999"}}`, ""))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeStaticPods(data, fileOpts("/q.yaml")); !errors.Is(err, ErrQuantityOutOfRange) {
			b.Fatal(err)
		}
	}
}

// A resource name is validated like the API server does (issue 23, item 1):
// qualified name, and a hugepages-<size> name with a bounded page size.
func TestDecodeRefusesBadResourceNames(t *testing.T) {
	for _, name := range []string{"hugepages-1e-99999999", "hugepages-1e99999999", "hugepages-0", "bad name!", "a/b/c"} {
		in := podYAML(`, resources: {limits: {"`+name+`": "1Mi"}}`, "")
		_, err := DecodeStaticPods([]byte(in), StaticPodOptions{NodeName: "n", Source: "file", Origin: "m.yaml"})
		if !errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), name) {
			t.Errorf("resource %q: err = %v, want ErrInvalidPod naming it", name, err)
		}
	}
	in := podYAML(`, resources: {limits: {"hugepages-2Mi": "2Mi", "example.com/dev": "1", memory: 1Gi}}`, "")
	if _, err := DecodeStaticPods([]byte(in), StaticPodOptions{NodeName: "n", Source: "file", Origin: "m.yaml"}); err != nil {
		t.Errorf("good resource names refused: %v", err)
	}
}

// A negative emptyDir sizeLimit is refused, not taken as "no limit" (issue
// 23, item 8).
func TestDecodeRefusesNegativeSizeLimit(t *testing.T) {
	in := podYAML("", "  volumes: [{name: v, emptyDir: {medium: Memory, sizeLimit: -1}}]\n")
	_, err := DecodeStaticPods([]byte(in), StaticPodOptions{NodeName: "n", Source: "file", Origin: "m.yaml"})
	if !errors.Is(err, ErrInvalidPod) || !strings.Contains(err.Error(), "sizeLimit") {
		t.Fatalf("err = %v, want ErrInvalidPod naming sizeLimit", err)
	}
}
