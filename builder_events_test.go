package nodekit_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/events"
	"github.com/nodekit/nodekit/kubetypes"
)

// TestWithEventRecorder: the agent records the node's Starting event and
// its parts record the pod's events (image, container) through every
// recorder given; the last warning of a crash-looping pod is kept.
func TestWithEventRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &events.Fake{}
		warnings, _ := events.NewLastWarnings(events.LastWarningsConfig{})
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web",
				Annotations: map[string]string{"kubernetes.io/config.source": "test"}},
			Spec: v1.PodSpec{HostNetwork: true, RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{{
				Name: "main", Image: "busybox:1", Command: []string{"sh", "-c", "exit 1"},
			}}},
		}
		agent, err := nodekit.NewBuilder().
			WithNodeName("node1").
			WithFakeRuntime().
			WithRootDir(t.TempDir()).
			WithEventRecorder(rec).
			WithEventRecorder(warnings).
			WithPodSource("test", func(out chan<- kubetypes.PodUpdate) (nodekit.PodSource, error) {
				return &onePodSource{out: out, pods: []*v1.Pod{pod}}, nil
			}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- agent.Run(ctx) }()
		for waited := time.Duration(0); len(rec.WithReason("BackOff")) == 0; waited += time.Second {
			if waited > 2*time.Minute {
				t.Fatalf("no BackOff within 2m:\n%s", rec)
			}
			<-time.After(time.Second)
			synctest.Wait()
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got := strings.Join(rec.Reasons(), ",")
		if !strings.HasPrefix(got, "Starting,Pulling,Pulled,Created,Started,") {
			t.Errorf("events %s", got)
		}
		start := rec.Events()[0]
		if start.Object.Kind != "Node" || start.Object.Name != "node1" || start.Message != "Starting kubelet." {
			t.Errorf("Starting event %s", start)
		}
		w, ok := warnings.Last("uid-web")
		if !ok || w.Reason != "BackOff" || !strings.HasPrefix(w.Message, "Back-off restarting failed container main in pod web_default") {
			t.Errorf("last warning %+v %v", w, ok)
		}
		if agent.EventRecorder() == nil {
			t.Error("EventRecorder is nil")
		}
	})
}

func TestWithEventRecorderNil(t *testing.T) {
	_, err := nodekit.NewBuilder().WithNodeName("n").WithFakeRuntime().WithRootDir(t.TempDir()).WithEventRecorder(nil).Build()
	if !errors.Is(err, nodekit.ErrInvalidConfig) || !strings.Contains(err.Error(), "WithEventRecorder") {
		t.Fatalf("Build = %v", err)
	}
}
