package nodekit_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/internal/agenttest"
)

const sidecarManifest = `apiVersion: v1
kind: Pod
metadata:
  name: with-sidecar
spec:
  hostNetwork: true
  dnsPolicy: Default
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: shipper
    image: busybox:1
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
  containers:
  - name: app
    image: busybox:1
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`

// A pod that needs a second sync (its app container starts once its
// sidecar runs) gets it from the PLEG's read of the pod after the first
// sync, not from the next periodic relist: with a one-hour relist period the
// app container still starts at once. (A status read that the pod worker
// takes as older than its last sync makes the second sync wait for the next
// relist, or for the evented PLEG's cache refresh.)
func TestFollowUpSyncDoesNotWaitForRelist(t *testing.T) {
	for _, evented := range []bool{false, true} {
		t.Run(fmt.Sprintf("evented=%v", evented), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "sidecar.yaml"), []byte(sidecarManifest), 0o644); err != nil {
				t.Fatal(err)
			}
			sink := agenttest.NewNameSink()
			b := nodekit.NewBuilder().
				WithNodeName("node1").
				WithFakeRuntime("busybox:1").
				WithManifestDir(dir).
				WithRootDir(t.TempDir()).
				WithStatusSink(sink)
			if evented {
				b.WithEventedPLEG()
			}
			agent, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			agent.PLEG().SetRelistPeriod(time.Hour, 2*time.Hour)
			stop := agenttest.StartAgent(t, agent)
			defer func() {
				if err := stop(); err != nil {
					t.Errorf("Run = %v", err)
				}
			}()
			// Far less than a relist period, and than the evented PLEG's
			// 5s cache refresh; far more than the milliseconds it takes.
			agenttest.WaitUntil(t, 4*time.Second, sink.Changed(), "app and sidecar running", func() (bool, string) {
				st, _ := sink.Status("with-sidecar-node1")
				running := 0
				for _, cs := range append(append([]v1.ContainerStatus(nil), st.InitContainerStatuses...), st.ContainerStatuses...) {
					if cs.State.Running != nil {
						running++
					}
				}
				return running == 2 && st.Phase == v1.PodRunning, fmt.Sprintf("phase %s, %d running", st.Phase, running)
			})
		})
	}
}
