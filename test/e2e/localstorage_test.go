//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/containermgr"
	"github.com/nodekit/nodekit/containermgr/cmwire"
	"github.com/nodekit/nodekit/eviction"
	"github.com/nodekit/nodekit/kubetypes"
	"github.com/nodekit/nodekit/syncloop"
	"github.com/nodekit/nodekit/volumemgr"
)

// lsTestPod is a busybox pod running cmd in container "main" (with the
// given ephemeral-storage limit, "" for none) and, when sideLimit is set,
// a sleeping "side" container with that limit; it has an emptyDir "data"
// mounted at /data, with sizeLimit when set.
func lsTestPod(name, image, limit, sideLimit, sizeLimit, cmd string) *v1.Pod {
	p := evictionTestPod(name, image, nil, cmd)
	if limit != "" {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limit)}
	}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if sideLimit != "" {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{
			Name: "side", Image: image, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(sideLimit)}},
		})
	}
	ed := &v1.EmptyDirVolumeSource{}
	if sizeLimit != "" {
		q := resource.MustParse(sizeLimit)
		ed.SizeLimit = &q
	}
	p.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: ed}}}
	return p
}

// TestEvictionLocalStorage runs the in-process agent on containerd with the
// container manager, the volume manager and eviction wired by default (no
// threshold: local storage limits are enforced on their own; the disk
// walker every second). Three pods write past one local storage limit each
// and must be evicted with the kubelet's reason and message: 4 MiB in an
// emptyDir with sizeLimit 1Mi; 4 MiB in the writable layer of a container
// limited to 2Mi (its pod's limit, 22Mi, is not reached); 6 MiB in an
// emptyDir without sizeLimit in a pod limited to 3Mi. A fourth pod that
// stays within its limits keeps running.
func TestEvictionLocalStorage(t *testing.T) {
	requireCgroupV1(t)
	e := volumeEnv(t)
	cm, _ := e.cgroupManager(t, "kubepods-ls-", containermgr.Config{}, false)

	root := t.TempDir()
	mounter := &volumemgr.SystemMounter{}
	vm, err := volumemgr.New(volumemgr.Config{
		PodsDir: filepath.Join(root, syncloop.PodsDirName),
		Plugins: volumemgr.DefaultPlugins(volumemgr.PluginsConfig{Mounter: mounter}),
		Mounter: mounter,
	})
	if err != nil {
		t.Fatal(err)
	}
	sets := make(chan []*v1.Pod, 1)
	statuses := newStatusSink()
	b := e.builder(root, "").
		WithLogger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))).
		WithStatusSink(statuses).
		WithPodSource(kubetypes.SourceAPI, podSets(kubetypes.SourceAPI, sets)).
		WithVolumeManager(vm).
		WithEvictionOptions(eviction.Config{Interval: time.Second}, nodekit.EvictionOptions{DiskUsagePeriod: time.Second})
	agent, err := cmwire.ContainerManager(b, cm).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	write := func(path string, mib int) string {
		return fmt.Sprintf("trap 'exit 0' TERM; dd if=/dev/zero of=%s bs=1048576 count=%d 2>/dev/null; sync; sleep 3600 & wait", path, mib)
	}
	names := map[string]string{
		"emptydir":  "ls-emptydir-" + nodeName,
		"container": "ls-container-" + nodeName,
		"pod":       "ls-pod-" + nodeName,
		"fine":      "ls-fine-" + nodeName,
	}
	want := map[string]string{
		names["emptydir"]:  `Usage of EmptyDir volume "data" exceeds the limit "1Mi". `,
		names["container"]: `Container main exceeded its local ephemeral storage limit "2Mi". `,
		names["pod"]:       "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. ",
	}
	sets <- []*v1.Pod{
		lsTestPod(names["emptydir"], e.busybox, "", "", "1Mi", write("/data/f", 4)),
		lsTestPod(names["container"], e.busybox, "2Mi", "20Mi", "", write("/big", 4)),
		lsTestPod(names["pod"], e.busybox, "3Mi", "", "", write("/data/f", 6)),
		lsTestPod(names["fine"], e.busybox, "50Mi", "", "50Mi", write("/data/f", 1)+"; dd if=/dev/zero of=/small bs=1048576 count=1"),
	}
	waitFor(t, 150*time.Second, "the three pods over a limit evicted", func() (bool, string) {
		var missing []string
		for name, msg := range want {
			st := statuses.get(name)
			if st.Phase != v1.PodFailed {
				missing = append(missing, fmt.Sprintf("%s %s", name, st.Phase))
				continue
			}
			if st.Reason != eviction.Reason || st.Message != msg {
				t.Fatalf("pod %s: %s %q, want %s %q", name, st.Reason, st.Message, eviction.Reason, msg)
			}
		}
		return len(missing) == 0, strings.Join(missing, ", ")
	})
	if st := statuses.get(names["fine"]); st.Phase != v1.PodRunning {
		t.Errorf("the pod within its limits is %s (%s: %s), want Running", st.Phase, st.Reason, st.Message)
	}
}
