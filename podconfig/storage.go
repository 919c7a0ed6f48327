package podconfig

import (
	"fmt"
	"maps"
	"sort"
	"time"

	"github.com/nodekit/nodekit/kubetypes"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// entry is one stored pod with the fingerprints of the parts the merge
// compares. The pod is shared with the consumers it was delivered to and is
// never modified: an update stores a new object. The fingerprints are
// computed when the entry is first compared with a newer version (fpOK), so
// a pod that is only loaded costs no hash.
type entry struct {
	pod       *v1.Pod
	semantic  uint64 // spec, labels, non-local annotations, deletion fields
	statusSum uint64
	fpOK      bool   // semantic and statusSum are computed
	gen       uint64 // the SET that last named this pod (see mergeScratch.gen)
}

// sums returns the stored pod's fingerprints, computing them the first
// time. The local annotations PodConfig added are outside both, so they
// equal the fingerprints of the pod as its source sent it.
func (e *entry) sums(fp *fingerprinter) (semantic, status uint64) {
	if !e.fpOK {
		e.semantic, e.statusSum = fp.sums(e.pod)
		e.fpOK = true
	}
	return e.semantic, e.statusSum
}

// mergeScratch is reused from merge to merge (under PodConfig.mu) so a
// resync of unchanged pods allocates nothing per pod.
type mergeScratch struct {
	gen   uint64 // counts SETs
	order []types.UID
	names map[nsName]struct{}
	uids  map[types.UID]struct{}
	pods  []*v1.Pod
	slabs slabs
	ann   annCache
}

// annCache lets consecutive new pods of one update whose annotations are
// equal (replicas of one template, say) share one annotations map: the
// stored pods are read-only, so one map can serve them all. It is reset
// after every update so no sender's map is kept.
type annCache struct {
	in          map[string]string // the previous new pod's annotations, as sent
	source, now string
	out         map[string]string // what was stored for them
}

type nsName struct{ ns, name string }

// slabSize bounds how many stored objects share one allocation. Objects are
// carved from slabs so a load of thousands of pods is a few dozen
// allocations instead of thousands; a slab lives while any object in it is
// referenced, so a long-lived pod keeps at most slabSize-1 others' memory,
// all from the same update (a slab is not kept from one update to the
// next).
const slabSize = 32

// slabs hands out stored pods and entries from chunks sized by the caller's
// hint (the pods left in the update), at most slabSize.
type slabs struct {
	pods    []v1.Pod
	entries []entry
}

func (s *slabs) pod(hint int) *v1.Pod {
	if len(s.pods) == 0 {
		s.pods = make([]v1.Pod, min(max(hint, 1), slabSize))
	}
	p := &s.pods[0]
	s.pods = s.pods[1:]
	return p
}

func (s *slabs) entry(hint int) *entry {
	if len(s.entries) == 0 {
		s.entries = make([]entry, min(max(hint, 1), slabSize))
	}
	e := &s.entries[0]
	s.entries = s.entries[1:]
	return e
}

// sourceState is everything known about one source.
type sourceState struct {
	pods  map[types.UID]*entry
	order []types.UID // delivery order: the order of the source's last SET, then additions
	seen  bool        // the source delivered a SET at least once
}

// diff is the outcome of merging one source update, before it is shaped into
// PodUpdates by the notification mode. Pods are the stored ones, delivered
// as they are (shared, read-only).
type diff struct {
	adds, updates, deletes, removes, reconciles []*v1.Pod
	firstSet                                    bool
}

func (d *diff) empty() bool {
	return len(d.adds)+len(d.updates)+len(d.deletes)+len(d.removes)+len(d.reconciles) == 0
}

// mergeLocked applies update u from source to the storage. Incoming pods
// become the storage's (the source must not modify them afterwards) but are
// never modified: a pod that is new or changed is stored as a shallow copy
// carrying the local annotations, sharing everything else with the sent one.
func (c *PodConfig) mergeLocked(source string, u kubetypes.PodUpdate) diff {
	st := c.sources[source]
	if st == nil {
		st = &sourceState{pods: make(map[types.UID]*entry)}
		c.sources[source] = st
	}
	var d diff
	now := c.clock.Now().UTC().Format(time.RFC3339Nano)

	switch u.Op {
	case kubetypes.SET:
		d.firstSet = !st.seen
		st.seen = true
		// Entries named by this SET get its generation; the others are
		// removed afterwards. The map is updated in place.
		c.scratch.gen++
		gen := c.scratch.gen
		order := c.scratch.order[:0]
		pods := c.filter(source, u.Pods, false)
		if len(st.pods) == 0 && len(pods) > 0 {
			// A (re)load: size the map and the delivery once.
			st.pods = make(map[types.UID]*entry, len(pods))
			d.adds = make([]*v1.Pod, 0, len(pods))
		}
		for i, p := range pods {
			old := st.pods[p.UID]
			if old != nil && old.gen == gen {
				// A UID already named by this SET (filter left UID
				// duplicates to this check).
				c.log.Info("dropping a pod: duplicate UID in one update",
					zap.String("source", source), zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(p.UID)))
				continue
			}
			e := c.upsert(source, old, p, now, len(pods)-i, &d)
			e.gen = gen
			if e != old {
				st.pods[p.UID] = e
			}
			if old == nil {
				c.owners[p.UID] = uidOwner{source: source, nsName: nsName{p.Namespace, p.Name}}
			}
			order = append(order, p.UID)
		}
		c.doneFiltered(pods)
		for _, uid := range st.order {
			if e, ok := st.pods[uid]; ok && e.gen != gen {
				d.removes = append(d.removes, e.pod)
				delete(st.pods, uid)
				c.disownLocked(source, uid)
			}
		}
		// Keep the old order's array for the next SET (of any source),
		// without the UIDs it held.
		clear(st.order)
		st.order, c.scratch.order = order, st.order[:0]
	case kubetypes.REMOVE:
		gone := make(map[types.UID]bool, len(u.Pods))
		for _, p := range u.Pods {
			if p == nil {
				continue
			}
			if e, ok := st.pods[p.UID]; ok && !gone[p.UID] {
				gone[p.UID] = true
				d.removes = append(d.removes, e.pod)
				delete(st.pods, p.UID)
				c.disownLocked(source, p.UID)
			}
		}
		if len(gone) > 0 {
			order := st.order[:0]
			for _, uid := range st.order {
				if !gone[uid] {
					order = append(order, uid)
				}
			}
			clear(st.order[len(order):])
			st.order = order
		}
	default: // ADD, UPDATE, DELETE, RECONCILE: upsert the given pods
		pods := c.filter(source, u.Pods, true)
		for i, p := range pods {
			old, existed := st.pods[p.UID]
			st.pods[p.UID] = c.upsert(source, old, p, now, len(pods)-i, &d)
			if !existed {
				st.order = append(st.order, p.UID)
				c.owners[p.UID] = uidOwner{source: source, nsName: nsName{p.Namespace, p.Name}}
			}
		}
		c.doneFiltered(pods)
	}
	if c.metrics != nil {
		c.metrics.pods.WithLabelValues(source).Set(float64(len(st.pods)))
	}
	// A slab left over holds its array, and with it the pods already
	// carved from it, after they are gone: the next update starts its own.
	c.scratch.slabs = slabs{}
	return d
}

// filter drops nil pods, pods without a UID or name, UIDs that are not
// safe path segments, and a second pod with the same namespace/name in one
// update (the later one), logging why. A SET checks duplicate UIDs itself
// (checkUIDs false): its entries carry the SET's generation.
func (c *PodConfig) filter(source string, pods []*v1.Pod, checkUIDs bool) []*v1.Pod {
	out := c.scratch.pods[:0]
	var names map[nsName]struct{}
	var uids map[types.UID]struct{}
	if len(pods) > 1 {
		if c.scratch.names == nil {
			c.scratch.names = make(map[nsName]struct{}, len(pods))
			c.scratch.uids = make(map[types.UID]struct{}, len(pods))
		}
		names = c.scratch.names
		if checkUIDs {
			uids = c.scratch.uids
		}
	}
	for i, p := range pods {
		if p == nil {
			c.log.Info("dropping a nil pod", zap.String("source", source), zap.Int("index", i))
			continue
		}
		if p.Name == "" || !IsSafePathSegment(string(p.UID)) {
			c.log.Info("dropping a pod without a usable name or UID",
				zap.String("source", source), zap.Int("index", i), zap.String("name", p.Name), zap.String("uid", string(p.UID)))
			continue
		}
		if err := c.checkOwnerLocked(source, p); err != nil {
			c.refuseLocked(source, err)
			continue
		}
		if names != nil {
			key := nsName{p.Namespace, p.Name}
			if _, dup := names[key]; dup {
				full := p.Namespace + "/" + p.Name
				c.log.Info("dropping a pod: duplicate namespace/name in one update",
					zap.String("source", source), zap.Int("index", i), zap.String("pod", full), zap.String("uid", string(p.UID)))
				continue
			}
			if _, dup := uids[p.UID]; dup {
				c.log.Info("dropping a pod: duplicate UID in one update",
					zap.String("source", source), zap.Int("index", i), zap.String("pod", p.Namespace+"/"+p.Name), zap.String("uid", string(p.UID)))
				continue
			}
			names[key] = struct{}{}
			if uids != nil {
				uids[p.UID] = struct{}{}
			}
		}
		out = append(out, p)
	}
	clear(names) // keep the capacity, not the caller's strings
	clear(uids)
	return out
}

// uidOwner is the source and namespace/name a stored UID belongs to.
type uidOwner struct {
	source string
	nsName
}

// checkOwnerLocked refuses a pod whose UID is stored for another source, or
// for another namespace/name: two pods with one UID would share one pod
// worker, one sandbox and one set of volumes on the node.
func (c *PodConfig) checkOwnerLocked(source string, p *v1.Pod) error {
	o, ok := c.owners[p.UID]
	if !ok || (o.source == source && o.ns == p.Namespace && o.name == p.Name) {
		return nil
	}
	if o.source != source {
		return fmt.Errorf("%w: pod %s/%s from source %q has UID %q, which pod %s/%s of source %q already has",
			ErrUIDConflict, p.Namespace, p.Name, source, p.UID, o.ns, o.name, o.source)
	}
	return fmt.Errorf("%w: pod %s/%s from source %q reuses UID %q of pod %s/%s",
		ErrUIDConflict, p.Namespace, p.Name, source, p.UID, o.ns, o.name)
}

// refuseLocked logs and counts a refused pod.
func (c *PodConfig) refuseLocked(source string, err error) {
	c.refused++
	c.log.Warn("refusing a pod", zap.String("source", source), zap.Error(err))
	if c.metrics != nil {
		c.metrics.refused.WithLabelValues(source, "uid_conflict").Inc()
	}
}

// disownLocked frees uid when source owns it.
func (c *PodConfig) disownLocked(source string, uid types.UID) {
	if o, ok := c.owners[uid]; ok && o.source == source {
		delete(c.owners, uid)
	}
}

// doneFiltered hands the slice filter returned back for reuse, dropping
// its references to the caller's pods.
func (c *PodConfig) doneFiltered(pods []*v1.Pod) {
	clear(pods)
	c.scratch.ann = annCache{}
	c.scratch.pods = pods[:0]
}

// upsert merges incoming pod p with the stored entry old (nil if the UID is
// new) and records the outcome in d. It returns the entry to store. Neither
// p nor the stored pod is modified. hint is how many pods of the update are
// left (p included): the size of the next slab.
//
// For the API-server source a pod whose UID and non-empty resourceVersion
// equal the stored ones is unchanged and is not fingerprinted: the API
// server gives every write to an object (status included) a new
// resourceVersion. Other sources (files, HTTP, tests) have no trustworthy
// resourceVersion and are always compared by fingerprint.
func (c *PodConfig) upsert(source string, old *entry, p *v1.Pod, now string, hint int, d *diff) *entry {
	sl := &c.scratch.slabs
	if old != nil && source == kubetypes.SourceAPI && p.ResourceVersion != "" &&
		p.ResourceVersion == old.pod.ResourceVersion && p.UID == old.pod.UID {
		return old
	}
	if old == nil {
		var cp *v1.Pod
		if ac := &c.scratch.ann; ac.out != nil && ac.source == source && ac.now == now && len(p.Annotations) > 0 && maps.Equal(ac.in, p.Annotations) {
			cp = sl.pod(hint)
			*cp = *p
			cp.Annotations = ac.out
		} else {
			cp = withLocalAnnotations(sl.pod(hint), p, localAnns{source: source, seen: now})
			*ac = annCache{in: p.Annotations, source: source, now: now, out: cp.Annotations}
		}
		d.adds = append(d.adds, cp)
		e := sl.entry(hint)
		e.pod = cp
		return e
	}
	oldSemantic, oldStatus := old.sums(c.fp)
	semantic, status := c.fp.sums(p)
	if semantic == oldSemantic {
		if status == oldStatus && p.ResourceVersion == old.pod.ResourceVersion {
			return old
		}
		// A new status, or only a new resourceVersion (outside both
		// fingerprints; kept current so the next resend of this object
		// takes the shortcut above): a new stored object, the old one may
		// be in a consumer's hands.
		cp := sl.pod(hint)
		*cp = *old.pod
		cp.ResourceVersion = p.ResourceVersion
		if status != oldStatus {
			cp.Status = p.Status
			d.reconciles = append(d.reconciles, cp)
		}
		e := sl.entry(hint)
		*e = entry{pod: cp, semantic: semantic, statusSum: status, fpOK: true}
		return e
	}
	seen, hasSeen := old.pod.Annotations[kubetypes.ConfigSeenAnnotation]
	mirror, hasMirror := old.pod.Annotations[kubetypes.ConfigMirrorAnnotation]
	cp := withLocalAnnotations(sl.pod(hint), p, localAnns{
		source: source, seen: seen, mirror: mirror, hasMirror: hasMirror, dropLocal: true,
	})
	if !hasSeen {
		delete(cp.Annotations, kubetypes.ConfigSeenAnnotation)
	}
	e := sl.entry(hint)
	*e = entry{pod: cp, semantic: semantic, statusSum: status, fpOK: true}
	if cp.DeletionTimestamp != nil {
		d.deletes = append(d.deletes, cp)
	} else {
		d.updates = append(d.updates, cp)
	}
	return e
}

// localAnns are the local annotations withLocalAnnotations sets.
type localAnns struct {
	source, seen string // config.source and config.seen
	mirror       string // config.mirror, set only when hasMirror
	hasMirror    bool
	dropLocal    bool // first drop the local annotations p carries
}

// withLocalAnnotations makes dst a shallow copy of p whose annotations are
// p's (without the local ones when la.dropLocal) plus those of la, and
// returns it. The copy shares everything else with p.
func withLocalAnnotations(dst, p *v1.Pod, la localAnns) *v1.Pod {
	ann, dropLocal := p.Annotations, la.dropLocal
	*dst = *p
	// Cloning copies a small map's table wholesale: cheaper than
	// inserting its entries one by one.
	var out map[string]string
	if len(ann) > 0 && len(ann) <= 5 {
		out = maps.Clone(ann)
		if dropLocal {
			delete(out, kubetypes.ConfigSourceAnnotation)
			delete(out, kubetypes.ConfigSeenAnnotation)
			delete(out, kubetypes.ConfigMirrorAnnotation)
		}
	} else {
		out = make(map[string]string, len(ann)+3)
		for k, v := range ann {
			if !dropLocal || !isLocalAnnotation(k) {
				out[k] = v
			}
		}
	}
	out[kubetypes.ConfigSourceAnnotation] = la.source
	out[kubetypes.ConfigSeenAnnotation] = la.seen
	if la.hasMirror {
		out[kubetypes.ConfigMirrorAnnotation] = la.mirror
	}
	dst.Annotations = out
	return dst
}

// shape turns a diff into the PodUpdates the mode delivers, in order.
// The pods in them are the stored ones: shared, read-only.
func (c *PodConfig) shapeLocked(source string, d diff) []kubetypes.PodUpdate {
	var out []kubetypes.PodUpdate
	switch c.mode {
	case Snapshot:
		if d.firstSet || !d.empty() {
			out = append(out, c.snapshotLocked())
		}
	case SnapshotAndUpdates:
		if d.firstSet || len(d.adds) > 0 || len(d.removes) > 0 {
			out = append(out, c.snapshotLocked())
		}
		out = appendUpdate(out, kubetypes.UPDATE, source, d.updates)
		out = appendUpdate(out, kubetypes.DELETE, source, d.deletes)
		out = appendUpdate(out, kubetypes.RECONCILE, source, d.reconciles)
	default: // Incremental
		out = appendUpdate(out, kubetypes.REMOVE, source, d.removes)
		out = appendUpdate(out, kubetypes.ADD, source, d.adds)
		out = appendUpdate(out, kubetypes.UPDATE, source, d.updates)
		out = appendUpdate(out, kubetypes.DELETE, source, d.deletes)
		if d.firstSet && len(d.adds)+len(d.updates)+len(d.deletes) == 0 {
			out = append(out, kubetypes.PodUpdate{Op: kubetypes.ADD, Source: source, Pods: []*v1.Pod{}})
		}
		out = appendUpdate(out, kubetypes.RECONCILE, source, d.reconciles)
	}
	return out
}

func appendUpdate(out []kubetypes.PodUpdate, op kubetypes.Op, source string, pods []*v1.Pod) []kubetypes.PodUpdate {
	if len(pods) == 0 {
		return out
	}
	return append(out, kubetypes.PodUpdate{Op: op, Source: source, Pods: pods})
}

// sourceNamesLocked returns the names of every source with state, sorted.
func (c *PodConfig) sourceNamesLocked() []string {
	names := make([]string, 0, len(c.sources))
	for n := range c.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// mergedLocked returns every stored pod (shared, read-only): sources by
// name, pods in source order.
func (c *PodConfig) mergedLocked() []*v1.Pod {
	n := 0
	for _, st := range c.sources {
		n += len(st.pods)
	}
	out := make([]*v1.Pod, 0, n)
	for _, name := range c.sourceNamesLocked() {
		st := c.sources[name]
		for _, uid := range st.order {
			if e, ok := st.pods[uid]; ok {
				out = append(out, e.pod)
			}
		}
	}
	return out
}

func (c *PodConfig) snapshotLocked() kubetypes.PodUpdate {
	return kubetypes.PodUpdate{Op: kubetypes.SET, Source: kubetypes.SourceAll, Pods: c.mergedLocked()}
}
