//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volumemgr"
)

// volumeEnv connects to the CRI endpoint the e2e tests share (setup also
// builds the standalone binary).
func volumeEnv(t *testing.T) *env {
	t.Helper()
	e := &env{
		endpoint: os.Getenv("NODEKIT_CRI_ENDPOINT"),
		busybox:  getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1"),
	}
	if e.endpoint == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT is not set: start containerd with " +
			"`NODEKIT_CONTAINERD_DIR=/tmp/nkc bash hack/containerd.sh start` and load its env " +
			"with `set -a; . /tmp/nkc/env; set +a`")
	}
	c, err := remote.New(remote.Config{Endpoint: e.endpoint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("containerd at %s: %v", e.endpoint, err)
	}
	e.cri = c
	return e
}

func writeConfigMap(t *testing.T, objects, value string) {
	t.Helper()
	dir := filepath.Join(objects, "configmaps", "default")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: default
data:
  key: %q
`, value)
	tmp := filepath.Join(dir, ".app-config.tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "app-config.yaml")); err != nil {
		t.Fatal(err)
	}
}

// volumePod: "writer" copies the configMap's key into the shared emptyDir
// every 0.2s; "reader" copies what the writer wrote to another file of
// the same emptyDir, and writes into a subPath of it. (Static pods may not
// use configMaps: the pod comes from a source of its own, as from an API
// server.)
func volumePod(image string) *v1.Pod {
	grace := int64(1)
	loop := func(body string) []string {
		return []string{"sh", "-c", "trap 'exit 0' TERM; " + body}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vols", Namespace: "default", UID: volumePodUID},
		Spec: v1.PodSpec{
			NodeName:                      nodeName,
			HostNetwork:                   true,
			DNSPolicy:                     v1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			Volumes: []v1.Volume{
				{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
					LocalObjectReference: v1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
			Containers: []v1.Container{
				{
					Name: "writer", Image: image, ImagePullPolicy: v1.PullNever,
					Command:      loop("while true; do cat /cfg/key > /shared/out.tmp && mv /shared/out.tmp /shared/out; sleep 0.2; done"),
					VolumeMounts: []v1.VolumeMount{{Name: "config", MountPath: "/cfg"}, {Name: "shared", MountPath: "/shared"}},
				},
				{
					Name: "reader", Image: image, ImagePullPolicy: v1.PullNever,
					Command:      loop("echo sub > /sub/hello; while true; do cat /shared/out > /shared/copy.tmp 2>/dev/null && mv /shared/copy.tmp /shared/copy; sleep 0.2; done"),
					VolumeMounts: []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}, {Name: "shared", MountPath: "/sub", SubPath: "reader/data"}},
				},
			},
		},
	}
}

const volumePodUID = "e2e-vols-0001"

// removeSandboxesOf stops and removes the pod's sandboxes through CRI.
func removeSandboxesOf(t *testing.T, e *env, uid string) {
	removeSandboxes(t, e.cri, func(m *runtimeapi.PodSandboxMetadata) bool { return m.GetUid() == uid })
}

// runVolumeAgent builds and runs an agent with the volume manager on
// root/pods (configMaps from root/objects) and the pods sent on sets;
// syncLoop, unless nil, tunes its sync loop. stop is runAgent's.
func runVolumeAgent(t *testing.T, e *env, root string, sets <-chan []*v1.Pod, syncLoop func(*syncloop.Config)) (*volumemgr.Manager, *nodekit.Agent, func()) {
	t.Helper()
	mounter := &volumemgr.SystemMounter{}
	mgr, err := volumemgr.New(volumemgr.Config{
		PodsDir: filepath.Join(root, "pods"),
		Plugins: volumemgr.DefaultPlugins(volumemgr.PluginsConfig{
			Objects: &volumemgr.DirObjectSource{Dir: filepath.Join(root, "objects")},
			Mounter: mounter,
		}),
		Mounter: mounter,
	})
	if err != nil {
		t.Fatal(err)
	}
	b := e.builder(root, "").
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))).
		WithPodSource("test", podSets("test", sets)).
		WithVolumes(mgr, mgr).
		WithPart("volumemgr", mgr.Run)
	if syncLoop != nil {
		b.WithSyncLoopConfig(syncLoop)
	}
	agent, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	mgr.SetPodSource(agent.Loop(), agent.Loop().PodWorkers(), agent.PodConfig().SeenAllSources)
	return mgr, agent, runAgent(t, agent, 30*time.Second)
}

// TestVolumes runs the Agent in-process with the volume manager on
// containerd: a pod reads its configMap (from a local objects dir) and
// sees an update without a restart, two containers share an emptyDir, a
// subPath is bound, and once the pod is deleted its volumes are torn down
// with no mount left behind.
func TestVolumes(t *testing.T) {
	e := volumeEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { removeSandboxesOf(t, e, volumePodUID) })
	root := t.TempDir()
	objects := filepath.Join(root, "objects")
	sets := make(chan []*v1.Pod, 4)
	writeConfigMap(t, objects, "v1")
	podsDir := filepath.Join(root, "pods")

	mgr, agent, stop := runVolumeAgent(t, e, root, sets, func(c *syncloop.Config) { c.ResyncInterval = 2 * time.Second })
	sets <- []*v1.Pod{volumePod(e.busybox)}

	var pod *v1.Pod
	waitFor(t, 60*time.Second, "the pod known to the agent", func() (bool, string) {
		for _, p := range agent.Pods() {
			if strings.HasPrefix(p.Name, "vols") {
				pod = p
				return true, ""
			}
		}
		select {
		case <-agent.Done():
			return false, fmt.Sprintf("the agent stopped: %v", agent.Err())
		default:
		}
		return false, "no pod yet"
	})
	shared := filepath.Join(podsDir, string(pod.UID), "volumes", "kubernetes.io~empty-dir", "shared")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(shared, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	waitFor(t, 60*time.Second, "the reader's copy of the configMap value", func() (bool, string) {
		return read("copy") == "v1", fmt.Sprintf("copy=%q out=%q", read("copy"), read("out"))
	})
	if got := read("reader/data/hello"); got != "sub\n" {
		t.Errorf("subPath file: %q, want %q", got, "sub\n")
	}
	ids := containerIDs(t, e)
	if len(ids) != 2 {
		t.Fatalf("running containers of the pod: %v", ids)
	}

	writeConfigMap(t, objects, "v2")
	waitFor(t, 60*time.Second, "the update seen in the running pod", func() (bool, string) {
		return read("copy") == "v2", fmt.Sprintf("copy=%q out=%q", read("copy"), read("out"))
	})
	if after := containerIDs(t, e); fmt.Sprint(after) != fmt.Sprint(ids) {
		t.Errorf("containers changed across the configMap update: %v -> %v", ids, after)
	}
	podDir := filepath.Join(podsDir, string(pod.UID))
	if points, _ := volumemgr.MountPointsUnder(podDir); len(points) == 0 {
		t.Error("no mount under the pod dir while it runs (the subPath bind)")
	}

	// Delete the pod: its volumes go and no mount is left.
	sets <- nil
	waitFor(t, 60*time.Second, "the pod's volumes torn down", func() (bool, string) {
		points, err := volumemgr.MountPointsUnder(podDir)
		_, serr := os.Stat(shared)
		return err == nil && len(points) == 0 && os.IsNotExist(serr) && len(mgr.GetVolumesInUse()) == 0,
			fmt.Sprintf("mounts %v (%v), shared dir: %v, in use %v", points, err, serr, mgr.GetVolumesInUse())
	})
	stop()
}

// containerIDs lists the running containers of the test's pod "vols" by
// container name.
func containerIDs(t *testing.T, e *env) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := e.cri.ListContainers(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, c := range cs {
		if c.GetState().String() != "CONTAINER_RUNNING" || !strings.HasPrefix(c.GetLabels()["io.kubernetes.pod.name"], "vols") {
			continue
		}
		out[c.GetMetadata().GetName()] = c.Id
	}
	return out
}

// TestVolumesAfterRestart: the agent stops while the pod runs (its
// emptyDir and a subPath bind mounted); a new agent, whose source no
// longer has the pod, reconstructs the volumes from disk and, once the
// sources are ready, tears them down: no mount is left under the pod dir.
func TestVolumesAfterRestart(t *testing.T) {
	e := volumeEnv(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	t.Cleanup(func() { removeSandboxesOf(t, e, volumePodUID) })
	root := t.TempDir()
	objects := filepath.Join(root, "objects")
	writeConfigMap(t, objects, "v1")
	podsDir := filepath.Join(root, "pods")
	podDir := filepath.Join(podsDir, volumePodUID)
	shared := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "shared")

	start := func(pods []*v1.Pod) (*volumemgr.Manager, func()) {
		t.Helper()
		sets := make(chan []*v1.Pod, 1)
		sets <- pods
		mgr, _, stop := runVolumeAgent(t, e, root, sets, nil)
		return mgr, stop
	}

	_, stop := start([]*v1.Pod{volumePod(e.busybox)})
	waitFor(t, 60*time.Second, "the subPath file written by the pod", func() (bool, string) {
		_, err := os.Stat(filepath.Join(shared, "reader", "data", "hello"))
		return err == nil, fmt.Sprint(err)
	})
	stop()
	if points, _ := volumemgr.MountPointsUnder(podDir); len(points) == 0 {
		t.Fatal("no subPath bind mount left by the first agent: the test would prove nothing")
	}

	mgr, stop := start(nil)
	waitFor(t, 60*time.Second, "the reconstructed volumes torn down", func() (bool, string) {
		points, err := volumemgr.MountPointsUnder(podDir)
		_, serr := os.Stat(shared)
		return err == nil && len(points) == 0 && os.IsNotExist(serr) && len(mgr.GetVolumesInUse()) == 0,
			fmt.Sprintf("mounts %v (%v), shared dir: %v, in use %v", points, err, serr, mgr.GetVolumesInUse())
	})
	stop()
}
