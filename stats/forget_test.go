package stats

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPerPodStateForgotten (issue 29): /metrics/resource holds no series
// of its own: they are made at each scrape from the pods that exist, so a
// pod gone has none. (The provider's CPU samples and volume measurements
// keep only what the last Summary saw: TestSummaryContainerGoneBetweenCalls
// and TestSummaryEphemeralStorage.)
func TestPerPodStateForgotten(t *testing.T) {
	e := newEnv(t)
	e.runPod("default", "web", "uid-web", map[string][2]string{"app": {"500m", "3Mi"}})
	e.runPod("default", "db", "uid-db", map[string][2]string{"db": {"250m", "2Mi"}, "side": {"10m", "1Mi"}})
	p := e.provider(Config{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewResourceCollector(p, CollectorConfig{Context: t.Context()}))
	podsIn := func() map[string]bool {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "pod" {
						out[l.GetValue()] = true
					}
				}
			}
		}
		return out
	}
	for range 2 {
		e.clk.Step(4 * time.Second)
		if _, err := p.Summary(t.Context(), false); err != nil {
			t.Fatal(err)
		}
	}
	if got := podsIn(); !got["web"] || !got["db"] {
		t.Fatalf("series of pods %v, want web and db", got)
	}

	sbs, err := e.rt.ListPodSandbox(t.Context(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.uid": "uid-db"}})
	if err != nil || len(sbs) != 1 {
		t.Fatalf("db's sandbox: %v %v", sbs, err)
	}
	if err := e.rt.RemovePodSandbox(t.Context(), sbs[0].Id); err != nil {
		t.Fatal(err)
	}
	e.clk.Step(4 * time.Second)
	if _, err := p.Summary(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	if got := podsIn(); got["db"] || !got["web"] {
		t.Errorf("series of pods %v after db went, want web only", got)
	}
}
