package volumemgr

import (
	"fmt"
	"os"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestPerPodStateForgotten (issue 29): once pods are gone from the pod
// list and their runtime is removed, a populator and a reconciler pass
// leave nothing of them: not in the desired state (pods, their volumes,
// their errors), the actual state (mounted volumes and subPaths), the
// populator's processed set or the reconciler's retries, and their volume
// directories are torn down.
func TestPerPodStateForgotten(t *testing.T) {
	var pods []*v1.Pod
	for i := range 20 {
		// "rbd" has no plugin: the pod gets an error recorded.
		pods = append(pods, testPod(fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("uid%d", i)), "data", "cm1", "rbd1"))
	}
	e := newEnv(t, pods...)
	e.sync()
	e.sync()
	if len(e.m.dsw.pods) != len(pods) || len(e.m.asw.pods) == 0 {
		t.Fatalf("before: %d desired pods, %d with mounts", len(e.m.dsw.pods), len(e.m.asw.pods))
	}
	e.pods.set()
	for _, p := range pods {
		e.pods.setRemoved(p.UID)
	}
	e.sync()
	e.sync()

	dsw, errs := len(e.m.dsw.pods), len(e.m.dsw.errors)
	asw := len(e.m.asw.pods) // with each its volumes and their subPaths
	processed, retry := len(e.m.pop.processed), len(e.m.rec.retry)
	if dsw+errs+asw+processed+retry != 0 {
		t.Errorf("kept: desired %d pods, %d errors; actual %d pods; %d processed; %d retries",
			dsw, errs, asw, processed, retry)
	}
	for _, p := range pods {
		if _, err := os.Stat(e.volDir(p.UID, PluginNameEmptyDir, "data")); !os.IsNotExist(err) {
			t.Errorf("volume directory of %s kept: %v", p.UID, err)
			break
		}
	}
}
