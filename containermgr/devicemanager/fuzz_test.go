package devicemanager

import (
	"errors"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// FuzzDecodeState: a checkpoint is either refused as ErrCorruptState or
// loads into a manager whose own encoding decodes to the same state.
func FuzzDecodeState(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"entries":[{"podUID":"p","container":"c","resource":"example.com/w","deviceIDs":["a","b"],"allocResp":"CgUKAUEQAQ=="}],"registered":{"example.com/w":["a","b","c"]}}`,
		`{"version":1,"entries":[],"registered":{}}`,
		`{"version":1,"entries":[{"podUID":"p","container":"c","resource":"example.com/w","deviceIDs":["a"]},{"podUID":"p","container":"d","resource":"example.com/w","deviceIDs":["a"]}]}`,
		`{"version":2}`, `[]`, `{"version":1} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptState) {
				t.Fatalf("error %v does not wrap ErrCorruptState", err)
			}
			return
		}
		m, err := New(Config{PluginDir: "/nonexistent"})
		if err != nil {
			t.Fatal(err)
		}
		for res, ids := range st.Registered {
			r := &resourceState{devices: map[string]*pluginapi.Device{}}
			for _, id := range ids {
				r.devices[id] = &pluginapi.Device{ID: id, Health: pluginapi.Unhealthy}
			}
			m.resources[res] = r
		}
		for _, e := range st.Entries {
			m.setAllocLocked(e.PodUID, e.Container, e.Resource, &allocation{ids: e.DeviceIDs, resp: e.resp})
		}
		out, err := m.encodeLocked()
		if err != nil {
			t.Fatal(err)
		}
		st2, err := decodeState(out)
		if err != nil || len(st2.Entries) != len(st.Entries) || len(st2.Registered) != len(st.Registered) {
			t.Fatalf("round trip: %v (%d/%d entries)", err, len(st2.Entries), len(st.Entries))
		}
	})
}
