package nodekit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/nodekit/nodekit"
	evapiserver "github.com/nodekit/nodekit/events/apiserver"
)

// BenchmarkExitToStatusEvents is BenchmarkContainerExitToStatus (evented
// PLEG, 10 pods; each op: a container exits, the sync loop syncs the pod,
// the runtime engine records Killing/Created/Started/BackOff events, the
// status shows the exit) with the agent's events going nowhere
// (events=none), to an API server that answers (events=apiserver), and to
// one whose every write hangs (events=apiserver-hanging): the loop's cost
// is the same, since recording only queues or drops.
//
//	go test -run '^$' -bench ExitToStatusEvents -benchtime 30x .
func BenchmarkExitToStatusEvents(b *testing.B) {
	for _, mode := range []string{"none", "apiserver", "apiserver-hanging"} {
		b.Run("events="+mode, func(b *testing.B) {
			var rec *evapiserver.Recorder
			more := func(bld *nodekit.Builder) {
				if mode == "none" {
					return
				}
				var cs kubernetes.Interface = fake.NewClientset()
				if mode == "apiserver-hanging" {
					// An API server that accepts the connection and never
					// answers (until the client gives up).
					release := make(chan struct{})
					srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
						select {
						case <-r.Context().Done():
						case <-release:
						}
					}))
					b.Cleanup(srv.Close)
					b.Cleanup(func() { close(release) }) // first: the handlers return
					var err error
					if cs, err = kubernetes.NewForConfig(&rest.Config{Host: srv.URL}); err != nil {
						b.Fatal(err)
					}
				}
				var err error
				rec, err = evapiserver.New(evapiserver.Config{Client: cs, NodeName: "node1"})
				if err != nil {
					b.Fatal(err)
				}
				bld.WithEventRecorder(rec).WithPart("events", rec.Run)
			}
			benchExitToStatus(b, 10, true, more)
			if rec != nil {
				b.ReportMetric(float64(rec.Sent()), "events-sent")
				b.ReportMetric(float64(rec.Dropped(evapiserver.DropQueueFull)), "events-dropped")
				b.ReportMetric(float64(rec.Queued()), "events-queued")
			}
		})
	}
}
