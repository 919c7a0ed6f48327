package devicemanager

import (
	"fmt"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// BenchmarkAdmitAllocate8of64: admission (choice, GetPreferredAllocation
// and Allocate over gRPC to an in-process plugin, the checkpoint written)
// of a pod asking for 8 of 64 devices, then its removal (another write).
func BenchmarkAdmitAllocate8of64(b *testing.B) {
	dir := shortDir(b)
	m := run(b, newManager(b, dir, nil))
	p := startPlugin(b, dir, "w.sock", widget, 64, &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true})
	if err := p.register(b, m.SocketPath(), pluginapi.Version); err != nil {
		b.Fatal(err)
	}
	waitFor(b, m.Manager, "64 devices", hasCounts(m.Manager, widget, 64, 64))
	// Other pods hold 24 devices, so the choice is among 40.
	for i := range 3 {
		if ok, _, msg := m.Admit(podWith(fmt.Sprintf("held%d", i), 8), nil); !ok {
			b.Fatal(msg)
		}
	}
	pod := podWith("bench", 8)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if ok, _, msg := m.Admit(pod, nil); !ok {
			b.Fatal(msg)
		}
		if err := m.RemovePod("bench"); err != nil {
			b.Fatal(err)
		}
	}
}
