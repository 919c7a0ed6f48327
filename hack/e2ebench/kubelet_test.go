package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The configuration is YAML the kubelet reads, with what a standalone
// kubelet on this host needs.
func TestKubeletConfig(t *testing.T) {
	p := kubeletParams{Endpoint: "unix:///tmp/nk/containerd.sock", StaticPodPath: "/w/manifests", PodLogsDir: "/w/pods",
		VolumePluginDir: "/w/vp", CgroupRoot: kubeletCgroupRoot, CgroupsPerQOS: true}
	var got map[string]any
	if err := yaml.Unmarshal([]byte(kubeletConfig(p)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"containerRuntimeEndpoint": "unix:///tmp/nk/containerd.sock", "staticPodPath": "/w/manifests",
		"podLogsDir": "/w/pods", "volumePluginDir": "/w/vp", "cgroupDriver": "cgroupfs",
		"cgroupRoot": "/nodekit-e2ebench-kubelet", "cgroupsPerQOS": true, "failCgroupV1": false, "failSwapOn": false,
		"enableServer": false, "readOnlyPort": float64(0), "healthzPort": float64(0), "oomScoreAdj": float64(0),
		"imageGCHighThresholdPercent": float64(100),
	}
	for k, v := range want {
		if !reflect.DeepEqual(got[k], v) {
			t.Errorf("%s: got %#v, want %#v", k, got[k], v)
		}
	}
	if _, ok := got["enforceNodeAllocatable"]; ok {
		t.Error("enforceNodeAllocatable set with QoS cgroups")
	}
	authz, _ := got["authorization"].(map[string]any)
	if authz["mode"] != "AlwaysAllow" {
		t.Errorf("authorization: %v", got["authorization"])
	}

	p.CgroupsPerQOS = false
	got = nil
	if err := yaml.Unmarshal([]byte(kubeletConfig(p)), &got); err != nil {
		t.Fatal(err)
	}
	if got["cgroupsPerQOS"] != false || !reflect.DeepEqual(got["enforceNodeAllocatable"], []any{}) {
		t.Errorf("without QoS cgroups: %v %v", got["cgroupsPerQOS"], got["enforceNodeAllocatable"])
	}
}

func TestKubeletArgs(t *testing.T) {
	got := strings.Join(kubeletArgs("/w", []string{"-v=4"}), " ")
	want := "--config /w/kubelet.yaml --root-dir /w/root --cert-dir /w/pki --hostname-override e2ebench-kubelet -v=4"
	if got != want {
		t.Errorf("got %q", got)
	}
	if endpointURL("/run/c.sock") != "unix:///run/c.sock" || endpointURL("unix:///x") != "unix:///x" {
		t.Error("endpointURL")
	}
}

func TestRunOrder(t *testing.T) {
	for _, c := range []struct {
		i       int
		kubelet bool
		want    string
	}{
		{0, false, "nodekit floor"}, {1, false, "floor nodekit"}, {2, false, "nodekit floor"},
		{0, true, "nodekit floor kubelet"}, {1, true, "floor kubelet nodekit"}, {2, true, "kubelet nodekit floor"}, {3, true, "nodekit floor kubelet"},
	} {
		if got := strings.Join(runOrder(c.i, c.kubelet), " "); got != c.want {
			t.Errorf("run %d kubelet %v: %q, want %q", c.i, c.kubelet, got, c.want)
		}
	}
}

func TestRunningRowsKubelet(t *testing.T) {
	rc := runningCase{Pods: 30,
		Nodekit: []time.Duration{2200 * time.Millisecond}, Floor: []time.Duration{2000 * time.Millisecond}, Kubelet: []time.Duration{3000 * time.Millisecond},
		NodekitCPU: []time.Duration{100 * time.Millisecond}, FloorCPU: []time.Duration{50 * time.Millisecond}, KubeletCPU: []time.Duration{1000 * time.Millisecond},
		NodekitHWM: []int64{20e6}, FloorHWM: []int64{10e6}, KubeletHWM: []int64{80e6}}
	byCase := map[string]Row{}
	for _, r := range runningRows(rc) {
		byCase[r.Case] = r
	}
	if r := byCase["manifests to running, 30 pods"]; r.Ratio != "1.10x" || r.Result != "met" || r.Kubelet != "3000.0ms" {
		t.Errorf("running: %+v", r)
	}
	if r := byCase["  kubelet/floor, 30 pods"]; r.Ratio != "1.50x" {
		t.Errorf("kubelet/floor: %+v", r)
	}
	if r := byCase["  nodekit/kubelet CPU, 30 pods"]; r.Ratio != "0.10x" || r.Result != "met" {
		t.Errorf("CPU: %+v", r)
	}
	if r := byCase["  nodekit/kubelet RSS, 30 pods"]; r.Ratio != "0.25x" {
		t.Errorf("RSS: %+v", r)
	}
	rc.NodekitCPU = []time.Duration{210 * time.Millisecond}
	rc.Nodekit = []time.Duration{2300 * time.Millisecond}
	byCase = map[string]Row{}
	for _, r := range runningRows(rc) {
		byCase[r.Case] = r
	}
	if r := byCase["  nodekit/kubelet CPU, 30 pods"]; r.Result != "MISSED" {
		t.Errorf("CPU over a fifth: %+v", r)
	}
	if r := byCase["manifests to running, 30 pods"]; r.Result != "MISSED" {
		t.Errorf("1.15x: %+v", r)
	}

	// The report grows a KUBELET column only when the kubelet ran.
	res := &Result{Running: []runningCase{rc}}
	res.Rows, res.Notes = rows(options{runs: 1, poll: time.Millisecond}, res)
	var buf bytes.Buffer
	printReport(&buf, res)
	if !strings.Contains(buf.String(), "KUBELET") || !strings.Contains(buf.String(), "2300.0ms  2000.0ms  3000.0ms") {
		t.Errorf("report:\n%s", buf.String())
	}
	rc.Kubelet, rc.KubeletCPU, rc.KubeletHWM = nil, nil, nil
	for _, r := range runningRows(rc) {
		if r.Kubelet != "" || strings.Contains(r.Case, "kubelet/") {
			t.Errorf("kubelet row without a kubelet: %+v", r)
		}
	}
}

func TestParseProcStatChildren(t *testing.T) {
	line := "4242 (kubelet) S 1 4242 4242 0 -1 4194560 1000 0 0 0 150 35 7 3 20 0 12 0 100 1000000 2000\n"
	self, children, err := parseProcStatAll(line)
	if err != nil || self != 1850*time.Millisecond || children != 100*time.Millisecond {
		t.Fatalf("got %v %v %v", self, children, err)
	}
}

func TestMountsUnder(t *testing.T) {
	info := strings.Join([]string{
		"22 1 0:21 / / rw - ext4 /dev/vda rw",
		"30 22 0:40 / /tmp/w rw - tmpfs tmpfs rw",
		"31 30 0:41 / /tmp/w/root/pods/x/volumes/a\\040b rw - tmpfs tmpfs rw",
		"32 22 0:42 / /tmp/w2 rw - tmpfs tmpfs rw",
		"short line",
	}, "\n")
	got := mountsUnder(info, "/tmp/w")
	want := []string{"/tmp/w/root/pods/x/volumes/a b", "/tmp/w"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if unescapeOctal(`a\`) != `a\` || unescapeOctal(`\134x`) != `\x` {
		t.Error("unescapeOctal")
	}
}

// The cgroup root is made in every v1 hierarchy (not cgroup2's) and its
// whole tree removed again.
func TestCgroupTree(t *testing.T) {
	root := t.TempDir()
	for _, h := range []string{"cpu", "memory", "unified", "notacgroup"} {
		if err := os.MkdirAll(filepath.Join(root, h), 0o755); err != nil {
			t.Fatal(err)
		}
		if h != "notacgroup" {
			if err := os.WriteFile(filepath.Join(root, h, "cgroup.procs"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	hs, err := hierarchies(root, false)
	if err != nil || len(hs) != 2 || filepath.Base(hs[0]) != "cpu" || filepath.Base(hs[1]) != "memory" {
		t.Fatalf("hierarchies %v %v", hs, err)
	}
	if err := makeCgroup(root, kubeletCgroupRoot); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "memory", kubeletCgroupRoot, "kubepods", "burstable", "podx")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "unified", kubeletCgroupRoot)); err == nil {
		t.Error("made in cgroup2's unified")
	}
	// runc mirrors pod cgroups into cgroup2's hierarchy: removed too.
	if err := os.MkdirAll(filepath.Join(root, "unified", kubeletCgroupRoot, "kubepods", "podx"), 0o755); err != nil {
		t.Fatal(err)
	}
	hs, _ = hierarchies(root, true)
	if err := removeCgroupTree(root, kubeletCgroupRoot); err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, kubeletCgroupRoot)); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", h, err)
		}
	}
	// Nothing there: nothing to do.
	if err := removeCgroupTree(root, kubeletCgroupRoot); err != nil {
		t.Error(err)
	}
	// A cgroup that cannot go (here: a file in it; in cgroupfs: tasks) is reported.
	if err := os.MkdirAll(filepath.Join(root, "cpu", kubeletCgroupRoot), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "cpu", kubeletCgroupRoot, "tasks"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeCgroupTree(root, kubeletCgroupRoot); err == nil {
		t.Error("a cgroup that stayed was not reported")
	}
}

func TestRemoveLogLinks(t *testing.T) {
	dir := t.TempDir()
	mine, other := "/w/pods", "/elsewhere"
	for name, dst := range map[string]string{"a_e2ebench_main-1.log": mine + "/x/main/0.log", "b_default_c-2.log": other + "/y/c/0.log"} {
		if err := os.Symlink(dst, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeLogLinks(dir, mine); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "b_default_c-2.log plain.log" {
		t.Errorf("left %v", left)
	}
	if err := removeLogLinks(filepath.Join(dir, "none"), mine); err != nil {
		t.Errorf("missing dir: %v", err)
	}
}
