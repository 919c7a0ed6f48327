package cpumanager

import (
	"errors"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func FuzzDecodeState(f *testing.F) {
	for _, s := range []string{
		`{"policyName":"static","defaultCpuSet":"0-7","entries":{"u":{"c":"1"}}}`,
		`{"policyName":"none","defaultCpuSet":""}`,
		`{"policyName":"static","defaultCpuSet":"0-20000000"}`,
		`{"entries":{"":{"":""}}}`,
		`[]`, `{"policyName":"static"} {}`,
	} {
		f.Add([]byte(s))
	}
	topo, _ := Synthetic8()
	f.Fuzz(func(t *testing.T, b []byte) {
		policy, st, err := decodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		// What decodes re-encodes to something that decodes the same.
		again, st2, err := decodeState(encodeState(policy, st))
		if err != nil || again != policy || !st2.defaultSet.Equals(st.defaultSet) || len(st2.entries) != len(st.entries) {
			t.Fatalf("round trip: %v", err)
		}
		_ = validateStatic(st, topo, topo.Difference(st.defaultSet))
	})
}

func benchAllocate(b *testing.B, sockets, cores, threads, numa, npods int) {
	topo := mustTopo(b, sockets, cores, threads, numa)
	m := started(b, newStatic(b, topo, 2, b.TempDir()))
	m.fs = nullFS{}
	pods := make([]*v1.Pod, npods)
	for i := range pods {
		pods[i] = pod("p"+strconv.Itoa(i), true, "4", "2", "500m")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for _, p := range pods {
			if err := m.AllocatePod(p); err != nil {
				b.Fatal(err)
			}
		}
		for _, p := range pods {
			if err := m.RemovePod(string(p.UID)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pods)), "ns/pod")
}

// BenchmarkStaticAllocate allocates and removes 8 (64 cpus) or 16 (256 cpus) Guaranteed pods (4+2
// exclusive cpus and a shared container each) per iteration; the
// checkpoint writes go to a file system that discards them, so this
// measures the policy itself.
func BenchmarkStaticAllocate(b *testing.B) {
	b.Run("cpus=64", func(b *testing.B) { benchAllocate(b, 2, 16, 2, 1, 8) })
	b.Run("cpus=256", func(b *testing.B) { benchAllocate(b, 2, 64, 2, 2, 16) })
}

// BenchmarkStaticAllocateCheckpointed is the same with real checkpoint
// writes (temp file, fsync, rename, directory fsync) on 256 cpus.
func BenchmarkStaticAllocateCheckpointed(b *testing.B) {
	topo := mustTopo(b, 2, 64, 2, 2)
	m := started(b, newStatic(b, topo, 2, b.TempDir()))
	p := pod("p", true, "4")
	b.ReportAllocs()
	for b.Loop() {
		if err := m.AllocatePod(p); err != nil {
			b.Fatal(err)
		}
		if err := m.RemovePod("p"); err != nil {
			b.Fatal(err)
		}
	}
}
