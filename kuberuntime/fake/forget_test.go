package fake

import (
	"fmt"
	"testing"
)

// TestPerPodStateForgotten (issue 29): the runtime keeps stopped sandboxes
// and exited containers, as a real one does, until they are removed (the
// agent's container GC removes them); removal leaves nothing: no entry, no
// pointer in the listing order's backing arrays, no pod IP in use, no
// attach session. The call record is bounded (TestCallRecordIsBounded).
func TestPerPodStateForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, r *Runtime, sandboxes, containers []string)
	}{
		{"RemovePodSandbox", func(t *testing.T, r *Runtime, sandboxes, _ []string) {
			for _, id := range sandboxes {
				if err := r.StopPodSandbox(t.Context(), id); err != nil {
					t.Fatal(err)
				}
				if err := r.RemovePodSandbox(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"RemoveContainer, then RemovePodSandbox", func(t *testing.T, r *Runtime, sandboxes, containers []string) {
			for _, id := range containers {
				if err := r.RemoveContainer(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range sandboxes {
				if err := r.RemovePodSandbox(t.Context(), id); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newFake(t, Config{Images: []string{"busybox"}})
			var sandboxes, containers []string
			for i := range 50 {
				sb := mustRun(t, r, podConfig(fmt.Sprintf("p%d", i), i%2 == 0, nil))
				sandboxes = append(sandboxes, sb)
				for j := range 2 {
					containers = append(containers, mustStart(t, r, sb, ctrConfig(fmt.Sprintf("c%d", j), "busybox", "sleep", "infinity")))
				}
			}
			tc.remove(t, r, sandboxes, containers)
			r.mu.Lock()
			defer r.mu.Unlock()
			if n := len(r.sandboxes) + len(r.sandboxOrder) + len(r.containers) + len(r.containerOrder); n != 0 {
				t.Errorf("kept: %d sandboxes (%d in order), %d containers (%d in order)",
					len(r.sandboxes), len(r.sandboxOrder), len(r.containers), len(r.containerOrder))
			}
			for i, sb := range r.sandboxOrder[:cap(r.sandboxOrder)] {
				if sb != nil {
					t.Errorf("sandbox order's backing array still points to a removed sandbox at %d", i)
					break
				}
			}
			for i, c := range r.containerOrder[:cap(r.containerOrder)] {
				if c != nil {
					t.Errorf("container order's backing array still points to a removed container at %d", i)
					break
				}
			}
			if len(r.usedIPs)+len(r.attached) != 0 {
				t.Errorf("kept: %d pod IPs in use, %d attach sessions", len(r.usedIPs), len(r.attached))
			}
		})
	}
}
