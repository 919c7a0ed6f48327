package volumemgr_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit/volumemgr"
)

// A configMap volume served from a local directory, as an edge agent would.
func ExampleDirObjectSource() {
	ctx := context.TODO() // examples only: library code takes the caller's context
	base, _ := os.MkdirTemp("", "volumes")
	defer os.RemoveAll(base)
	objects := filepath.Join(base, "objects")
	_ = os.MkdirAll(filepath.Join(objects, "configmaps", "default"), 0o755)
	_ = os.WriteFile(filepath.Join(objects, "configmaps", "default", "app.yaml"),
		[]byte("data:\n  greeting: hello\n"), 0o644)

	plugins := volumemgr.DefaultPlugins(volumemgr.PluginsConfig{
		Objects: &volumemgr.DirObjectSource{Dir: objects},
	})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	vol := &v1.Volume{Name: "config", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
		LocalObjectReference: v1.LocalObjectReference{Name: "app"},
	}}}
	p, err := volumemgr.FindPlugin(plugins, vol)
	if err != nil {
		fmt.Println(err)
		return
	}
	dir := filepath.Join(base, "pods", string(pod.UID), "volumes", volumemgr.EscapePluginName(p.Name()), vol.Name)
	if err := p.SetUp(ctx, pod, vol, dir); err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(filepath.Join(dir, "greeting"))
	link, _ := os.Readlink(filepath.Join(dir, "greeting"))
	fmt.Println(filepath.Base(filepath.Dir(dir)), string(b), link)

	// A traversal in an item path is refused before any file system call.
	vol.ConfigMap.Items = []v1.KeyToPath{{Key: "greeting", Path: "../../escape"}}
	fmt.Println(p.SetUp(ctx, pod, vol, dir) != nil)
	// Output:
	// kubernetes.io~configmap hello ..data/greeting
	// true
}
