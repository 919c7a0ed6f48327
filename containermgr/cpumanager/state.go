package cpumanager

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	"k8s.io/utils/cpuset"

	"github.com/nodekit/nodekit/containermgr/topology"
)

// StateFileName is the checkpoint's name inside Config.StateDir.
const StateFileName = "cpu_manager_state"

// Bounds on a decoded checkpoint.
const (
	maxStatePods       = 10000
	maxStateContainers = 1000 // per pod
	maxNameLen         = 253
)

// state is the manager's assignment table: the shared pool and the
// exclusive CPUs per pod UID and container name. It is treated as a value:
// changes are made on a clone, persisted, then swapped in.
type state struct {
	defaultSet cpuset.CPUSet
	entries    map[string]map[string]cpuset.CPUSet
	// text holds each entry's cpuset in list format, made once when the
	// entry is set, so a checkpoint write does not re-render every entry.
	text map[string]map[string]string
}

func newState(def cpuset.CPUSet) state {
	return state{defaultSet: def, entries: map[string]map[string]cpuset.CPUSet{}, text: map[string]map[string]string{}}
}

func (s state) clone() state {
	c := state{defaultSet: s.defaultSet,
		entries: make(map[string]map[string]cpuset.CPUSet, len(s.entries)),
		text:    make(map[string]map[string]string, len(s.text)),
	}
	for uid, ctrs := range s.entries {
		c.entries[uid] = maps.Clone(ctrs)
		c.text[uid] = maps.Clone(s.text[uid])
	}
	return c
}

func (s state) remove(uid, name string) {
	delete(s.entries[uid], name)
	delete(s.text[uid], name)
	if len(s.entries[uid]) == 0 {
		delete(s.entries, uid)
		delete(s.text, uid)
	}
}

func (s state) get(uid, name string) (cpuset.CPUSet, bool) {
	set, ok := s.entries[uid][name]
	return set, ok
}

func (s state) set(uid, name string, cpus cpuset.CPUSet) {
	if s.entries[uid] == nil {
		s.entries[uid] = map[string]cpuset.CPUSet{}
		s.text[uid] = map[string]string{}
	}
	s.entries[uid][name] = cpus
	s.text[uid][name] = cpus.String()
}

func (s state) exclusive() cpuset.CPUSet {
	var all []cpuset.CPUSet
	for _, ctrs := range s.entries {
		for _, set := range ctrs {
			all = append(all, set)
		}
	}
	return cpuset.New().Union(all...)
}

// stateFile is the JSON layout of the checkpoint (the kubelet's field
// names; the checksum lives in the checkpoint header instead).
type stateFile struct {
	PolicyName    string                       `json:"policyName"`
	DefaultCPUSet string                       `json:"defaultCpuSet"`
	Entries       map[string]map[string]string `json:"entries,omitempty"`
}

// encodeState renders s deterministically (map keys sorted by encoding/json).
func encodeState(policy string, s state) []byte {
	f := stateFile{PolicyName: policy, DefaultCPUSet: s.defaultSet.String()}
	if len(s.text) > 0 {
		f.Entries = s.text
	}
	b, _ := json.Marshal(f) // strings and maps of strings cannot fail
	return b
}

// decodeState parses a checkpoint payload. It checks the syntax and the
// bounds only; validate checks the content against the policy.
func decodeState(b []byte) (policy string, s state, err error) {
	var f stateFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return "", state{}, fmt.Errorf("%w: %w", ErrCorruptState, err)
	}
	if dec.More() {
		return "", state{}, fmt.Errorf("%w: trailing data after the JSON object", ErrCorruptState)
	}
	if len(f.Entries) > maxStatePods {
		return "", state{}, fmt.Errorf("%w: %d pods, limit %d", ErrCorruptState, len(f.Entries), maxStatePods)
	}
	s.defaultSet, err = topology.ParseCPUSet(f.DefaultCPUSet)
	if err != nil {
		return "", state{}, fmt.Errorf("%w: defaultCpuSet: %w", ErrCorruptState, err)
	}
	s.entries = make(map[string]map[string]cpuset.CPUSet, len(f.Entries))
	s.text = make(map[string]map[string]string, len(f.Entries))
	for uid, ctrs := range f.Entries {
		if uid == "" || len(uid) > maxNameLen || len(ctrs) > maxStateContainers {
			return "", state{}, fmt.Errorf("%w: bad pod entry %.64q", ErrCorruptState, uid)
		}
		for name, str := range ctrs {
			if name == "" || len(name) > maxNameLen {
				return "", state{}, fmt.Errorf("%w: pod %s: bad container name %.64q", ErrCorruptState, uid, name)
			}
			set, err := topology.ParseCPUSet(str)
			if err != nil {
				return "", state{}, fmt.Errorf("%w: pod %s container %s: %w", ErrCorruptState, uid, name, err)
			}
			s.set(uid, name, set)
		}
	}
	return f.PolicyName, s, nil
}

// validateStatic checks a loaded static-policy state against the machine,
// as the kubelet does on start: assignments need a non-empty shared pool,
// the reserved CPUs must all be in the pool, no assignment may overlap the
// pool, and pool plus assignments must be exactly the machine's CPUs.
func validateStatic(s state, all, reserved cpuset.CPUSet) error {
	if s.defaultSet.IsEmpty() {
		if len(s.entries) > 0 {
			return fmt.Errorf("%w: default cpuset cannot be empty when assignments exist", ErrCorruptState)
		}
		return nil // never initialised: the caller fills it
	}
	if !reserved.IsSubsetOf(s.defaultSet) {
		return fmt.Errorf("%w: not all reserved cpus %q are in the default cpuset %q", ErrCorruptState, reserved, s.defaultSet)
	}
	uids := make([]string, 0, len(s.entries))
	for uid := range s.entries {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		for name, set := range s.entries[uid] {
			if !set.Intersection(s.defaultSet).IsEmpty() {
				return fmt.Errorf("%w: pod %s container %s: cpuset %q overlaps the default cpuset %q", ErrCorruptState, uid, name, set, s.defaultSet)
			}
		}
	}
	if known := s.defaultSet.Union(s.exclusive()); !known.Equals(all) {
		return fmt.Errorf("%w: the machine's cpus %q do not match the cpus in the state %q", ErrCorruptState, all, known)
	}
	return nil
}
