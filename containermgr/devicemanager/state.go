package devicemanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodekit/nodekit/internal/checkpoint"
)

// stateVersion is the version of the checkpoint's JSON.
const stateVersion = 1

// stateFile is the checkpoint's JSON: every allocation with the plugin's
// response, and every resource's device IDs.
type stateFile struct {
	Version    int                 `json:"version"`
	Entries    []stateEntry        `json:"entries"`
	Registered map[string][]string `json:"registered"`
}

type stateEntry struct {
	PodUID    string   `json:"podUID"`
	Container string   `json:"container"`
	Resource  string   `json:"resource"`
	DeviceIDs []string `json:"deviceIDs"`
	// AllocResp is the plugin's ContainerAllocateResponse (protobuf).
	AllocResp []byte `json:"allocResp,omitempty"`

	resp *pluginapi.ContainerAllocateResponse
}

// encodeLocked renders the state in a stable order.
func (m *Manager) encodeLocked() ([]byte, error) {
	st := stateFile{Version: stateVersion, Entries: []stateEntry{}, Registered: map[string][]string{}}
	for res, r := range m.resources {
		ids := make([]string, 0, len(r.devices))
		for id := range r.devices {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		st.Registered[res] = ids
	}
	for uid, ctrs := range m.alloc {
		for ctr, rs := range ctrs {
			for res, a := range rs {
				e := stateEntry{PodUID: uid, Container: ctr, Resource: res, DeviceIDs: sorted(a.ids)}
				if a.resp != nil {
					b, err := proto.MarshalOptions{Deterministic: true}.Marshal(a.resp)
					if err != nil {
						return nil, err
					}
					e.AllocResp = b
				}
				st.Entries = append(st.Entries, e)
			}
		}
	}
	sort.Slice(st.Entries, func(i, j int) bool {
		a, b := st.Entries[i], st.Entries[j]
		if a.PodUID != b.PodUID {
			return a.PodUID < b.PodUID
		}
		if a.Container != b.Container {
			return a.Container < b.Container
		}
		return a.Resource < b.Resource
	})
	return json.Marshal(st)
}

// persistLocked writes the state. When the write reports an error but the
// file already holds the state (the error came from the directory sync
// after the rename) it counts as written.
func (m *Manager) persistLocked() error {
	data, err := m.encodeLocked()
	if err != nil {
		return err
	}
	err = checkpoint.WriteFS(m.fs, m.cfg.StateDir, StateFileName, data)
	if err == nil {
		return nil
	}
	if got, rerr := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName); rerr == nil && bytes.Equal(got, data) {
		m.cfg.Logger.Warn("device manager checkpoint written, but its durability is unknown", zap.Error(err))
		return nil
	}
	return err
}

func (m *Manager) load() (stateFile, error) {
	b, err := checkpoint.ReadFS(m.fs, m.cfg.StateDir, StateFileName)
	if err != nil {
		return stateFile{}, err
	}
	return decodeState(b)
}

// decodeState parses and checks a checkpoint: known version, valid
// resource names, non-empty IDs, no container listed twice for a
// resource, no device held by two pods, every response decodable.
func decodeState(b []byte) (stateFile, error) {
	var st stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return stateFile{}, fmt.Errorf("%w: %v", ErrCorruptState, err)
	}
	if st.Version != stateVersion {
		return stateFile{}, fmt.Errorf("%w: version %d, want %d", ErrCorruptState, st.Version, stateVersion)
	}
	bad := func(f string, a ...any) (stateFile, error) {
		return stateFile{}, fmt.Errorf("%w: %s", ErrCorruptState, fmt.Sprintf(f, a...))
	}
	for res, ids := range st.Registered {
		if CheckResourceName(res) != nil {
			return bad("bad resource name %q", res)
		}
		if len(ids) > MaxDevicesPerResource {
			return bad("resource %q has %d devices", res, len(ids))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if id == "" || seen[id] {
				return bad("resource %q: empty or repeated device ID %q", res, id)
			}
			seen[id] = true
		}
	}
	type key struct{ uid, ctr, res string }
	seen := map[key]bool{}
	owner := map[[2]string]string{} // resource, device -> pod UID
	for i := range st.Entries {
		e := &st.Entries[i]
		if e.PodUID == "" || e.Container == "" || len(e.PodUID) > 253 || len(e.Container) > 253 {
			return bad("entry %d: empty or long pod UID or container name", i)
		}
		if CheckResourceName(e.Resource) != nil {
			return bad("entry %d: bad resource name %q", i, e.Resource)
		}
		k := key{e.PodUID, e.Container, e.Resource}
		if seen[k] {
			return bad("entry %d: pod %s container %s resource %s listed twice", i, e.PodUID, e.Container, e.Resource)
		}
		seen[k] = true
		if len(e.DeviceIDs) == 0 {
			return bad("entry %d: no device IDs", i)
		}
		for _, id := range e.DeviceIDs {
			if id == "" {
				return bad("entry %d: empty device ID", i)
			}
			o := [2]string{e.Resource, id}
			if p, ok := owner[o]; ok && p != e.PodUID {
				return bad("device %s of %s held by pods %s and %s", id, e.Resource, p, e.PodUID)
			}
			owner[o] = e.PodUID
		}
		if len(e.AllocResp) > 0 {
			e.resp = &pluginapi.ContainerAllocateResponse{}
			if err := proto.Unmarshal(e.AllocResp, e.resp); err != nil {
				return bad("entry %d: allocate response: %v", i, err)
			}
		}
	}
	return st, nil
}
