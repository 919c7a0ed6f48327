package volumemgr_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volumemgr"
)

// pods is a fixed pod list; with no PodStateProvider a pod's volumes go
// once it is no longer listed.
type pods []*v1.Pod

func (p *pods) Pods() []*v1.Pod { return *p }

// The manager driven by hand, one populator and one reconciler pass at a
// time: an emptyDir is set up, handed to a container, and torn down when
// the pod goes.
func Example() {
	root, err := os.MkdirTemp("", "volumemgr-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(root)
	podsDir := filepath.Join(root, "pods")

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "6a1c"},
		Spec: v1.PodSpec{
			Volumes: []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
			Containers: []v1.Container{{
				Name:         "app",
				VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}},
			}},
		},
	}
	list := &pods{pod}
	mgr, err := volumemgr.New(volumemgr.Config{PodsDir: podsDir, Pods: list})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	mgr.PopulateOnce(ctx)
	mgr.ReconcileOnce(ctx)
	if err := mgr.WaitForAttachAndMount(ctx, pod); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("in use:", mgr.GetVolumesInUse())
	mounts, err := mgr.ContainerMounts(ctx, pod, &pod.Spec.Containers[0])
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range mounts {
		fmt.Println("mount", strings.TrimPrefix(m.HostPath, podsDir+"/"), "->", m.ContainerPath, "read-only:", m.Readonly)
	}

	*list = nil // the pod is deleted
	mgr.PopulateOnce(ctx)
	mgr.ReconcileOnce(ctx)
	if err := mgr.WaitForUnmount(ctx, pod); err != nil {
		fmt.Println(err)
		return
	}
	_, err = os.Stat(filepath.Join(podsDir, "6a1c", "volumes", "kubernetes.io~empty-dir", "cache"))
	fmt.Println("in use:", mgr.GetVolumesInUse(), "dir removed:", os.IsNotExist(err))
	// Output:
	// in use: [kubernetes.io/empty-dir/6a1c-cache]
	// mount 6a1c/volumes/kubernetes.io~empty-dir/cache -> /cache read-only: false
	// in use: [] dir removed: true
}
