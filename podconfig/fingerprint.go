package podconfig

import (
	"hash/maphash"
	"math/bits"
	"reflect"
	"time"
	"unsafe"

	"github.com/nodekit/nodekit/kubetypes"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The merge decides "unchanged" by comparing 64-bit fingerprints of the
// parts of a pod it cares about, computed by walking the Go values field by
// field: no encoding, no strings built, no allocation in the steady state.
//
// What counts as equal (documented in doc.go too):
//   - every field of the spec, and of the status for the status fingerprint,
//     including fields added to k8s.io/api later (the walk is derived from
//     the types by reflection once per PodConfig, not written by hand);
//   - a nil and an empty slice or map are equal; a nil pointer and a pointer
//     to a zero value are not;
//   - resource quantities are equal when they have the same value and the
//     same format (decimal SI, binary SI, exponent), whatever the notation:
//     "100m" and "0.1" are the same, and so are "1000" and "1k"; "1Ki" and
//     "1024" are not (binary versus decimal). Zero equals zero in any form.
//     Equal value and format mean equal Quantity.String, so the JSON of the
//     pod, its static UID and the kubelet's container hash do not change
//     either. The kubelet's own merge compares with reflect.DeepEqual, which
//     tells "100m" from "0.1" by their internal form and reports an update
//     that changes nothing; the merge here does not;
//   - times are equal when they are the same instant.
//
// Fingerprints are seeded per PodConfig (hash/maphash) and only compared in
// memory: they are not stable across processes and never persisted.
//
// Each step h' = mix(h, v) is a bijection of h for every v, so two walks
// that differ in exactly one hashed word never collide; otherwise a
// collision is about as likely as for any 64-bit hash.

type hashKind uint8

const (
	hkNone hashKind = iota // zero-size: nothing to hash
	hkBool
	hkInt
	hkUint
	hkFloat
	hkString
	hkPtr
	hkSlice
	hkArray
	hkStruct
	hkMap
	hkQuantity
	hkTime
	hkOpaque // interfaces, channels, funcs, complex: not in pods; hashed as a constant
)

// hashField is one field of a struct plan. Fields of nested structs held by
// value are flattened into their parent, with offsets from its start.
type hashField struct {
	off  uintptr
	kind hashKind
	size uintptr
	plan *hashPlan
}

// hashPlan says how to hash a value of one Go type.
type hashPlan struct {
	kind   hashKind
	size   uintptr
	typ    reflect.Type
	elem   *hashPlan // pointer, slice, array, map value
	key    *hashPlan // map key
	n      int       // array length
	fields []hashField
	// map scratch, reused when the map is not nested in itself
	iter         *reflect.MapIter
	kbuf, vbuf   reflect.Value
	scratchInUse bool
}

func compilePlan(t reflect.Type, memo map[reflect.Type]*hashPlan) *hashPlan {
	if p, ok := memo[t]; ok {
		return p
	}
	p := &hashPlan{typ: t, size: t.Size()}
	memo[t] = p
	switch {
	case t == reflect.TypeFor[resource.Quantity]():
		p.kind = hkQuantity
		return p
	case t == reflect.TypeFor[time.Time]():
		p.kind = hkTime
		return p
	case t.Size() == 0:
		p.kind = hkNone
		return p
	}
	switch t.Kind() {
	case reflect.Bool:
		p.kind = hkBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind = hkInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.kind = hkUint
	case reflect.Float32, reflect.Float64:
		p.kind = hkFloat
	case reflect.String:
		p.kind = hkString
	case reflect.Pointer:
		p.kind = hkPtr
		p.elem = compilePlan(t.Elem(), memo)
	case reflect.Slice:
		p.kind = hkSlice
		p.elem = compilePlan(t.Elem(), memo)
	case reflect.Array:
		p.kind = hkArray
		p.n = t.Len()
		p.elem = compilePlan(t.Elem(), memo)
	case reflect.Struct:
		p.kind = hkStruct
		for i := range t.NumField() {
			f := t.Field(i)
			fp := compilePlan(f.Type, memo)
			switch fp.kind {
			case hkNone:
			case hkStruct: // complete: a struct cannot hold itself by value
				for _, sub := range fp.fields {
					sub.off += f.Offset
					p.fields = append(p.fields, sub)
				}
			default:
				p.fields = append(p.fields, hashField{off: f.Offset, kind: fp.kind, size: fp.size, plan: fp})
			}
		}
	case reflect.Map:
		p.kind = hkMap
		p.key = compilePlan(t.Key(), memo)
		p.elem = compilePlan(t.Elem(), memo)
		p.iter = new(reflect.MapIter)
		p.kbuf = reflect.New(t.Key()).Elem()
		p.vbuf = reflect.New(t.Elem()).Elem()
	default:
		p.kind = hkOpaque
	}
	return p
}

// mix folds v into the state h: multiply by an odd constant and rotate,
// a bijection of h for fixed v. Results are finalized before use.
func mix(h, v uint64) uint64 {
	return bits.RotateLeft64((h^v)*0x9e3779b97f4a7c15, 31)
}

// finalize spreads every bit of h over the result (splitmix64's finalizer).
func finalize(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

const (
	hashNil     = 0x6e696c // "nil"
	hashPresent = 0x736574 // "set"
	hashInit    = 0x9e3779b97f4a7c15
)

// fingerprinter hashes the parts of a pod the merge compares. It is not
// safe for concurrent use (PodConfig uses it under its lock).
type fingerprinter struct {
	seed   maphash.Seed
	spec   *hashPlan
	status *hashPlan
	time   *hashPlan
	qbuf   []byte
}

func newFingerprinter() *fingerprinter {
	memo := make(map[reflect.Type]*hashPlan)
	return &fingerprinter{
		seed:   maphash.MakeSeed(),
		spec:   compilePlan(reflect.TypeFor[v1.PodSpec](), memo),
		status: compilePlan(reflect.TypeFor[v1.PodStatus](), memo),
		time:   compilePlan(reflect.TypeFor[time.Time](), memo),
		qbuf:   make([]byte, 0, 64),
	}
}

// sums returns the (semantic, status) fingerprints of pod: semantic covers
// the spec, labels, annotations other than the local ones, the deletion
// timestamp and grace period; status covers the status.
func (f *fingerprinter) sums(pod *v1.Pod) (uint64, uint64) {
	h := f.walk(f.spec, unsafe.Pointer(&pod.Spec), hashInit)
	h = mix(h, f.mapSum(pod.Labels, false))
	h = mix(h, f.mapSum(pod.Annotations, true))
	if t := pod.DeletionTimestamp; t != nil {
		h = f.walk(f.time, unsafe.Pointer(&t.Time), mix(h, hashPresent))
	} else {
		h = mix(h, hashNil)
	}
	if g := pod.DeletionGracePeriodSeconds; g != nil {
		h = mix(mix(h, hashPresent), uint64(*g))
	} else {
		h = mix(h, hashNil)
	}
	return finalize(h), finalize(f.walk(f.status, unsafe.Pointer(&pod.Status), hashInit))
}

// walk folds the value of plan's type at ptr into h.
func (f *fingerprinter) walk(p *hashPlan, ptr unsafe.Pointer, h uint64) uint64 {
	switch p.kind {
	case hkBool:
		if *(*bool)(ptr) {
			return mix(h, 1)
		}
		return mix(h, 2)
	case hkInt:
		switch p.size {
		case 1:
			return mix(h, uint64(*(*int8)(ptr)))
		case 2:
			return mix(h, uint64(*(*int16)(ptr)))
		case 4:
			return mix(h, uint64(*(*int32)(ptr)))
		default:
			return mix(h, uint64(*(*int64)(ptr)))
		}
	case hkUint:
		switch p.size {
		case 1:
			return mix(h, uint64(*(*uint8)(ptr)))
		case 2:
			return mix(h, uint64(*(*uint16)(ptr)))
		case 4:
			return mix(h, uint64(*(*uint32)(ptr)))
		default:
			return mix(h, *(*uint64)(ptr))
		}
	case hkFloat:
		if p.size == 4 {
			return mix(h, uint64(*(*uint32)(ptr)))
		}
		return mix(h, *(*uint64)(ptr))
	case hkString:
		return f.mixString(h, *(*string)(ptr))
	case hkPtr:
		q := *(*unsafe.Pointer)(ptr)
		if q == nil {
			return mix(h, hashNil)
		}
		return f.walk(p.elem, q, mix(h, hashPresent))
	case hkSlice:
		data := *(*unsafe.Pointer)(ptr)
		n := *(*int)(unsafe.Add(ptr, unsafe.Sizeof(uintptr(0))))
		h = mix(h, uint64(n))
		if p.elem.kind == hkUint && p.elem.size == 1 && n > 0 {
			return mix(h, maphash.Bytes(f.seed, unsafe.Slice((*byte)(data), n)))
		}
		for i := range n {
			h = f.walk(p.elem, unsafe.Add(data, uintptr(i)*p.elem.size), h)
		}
		return h
	case hkArray:
		for i := range p.n {
			h = f.walk(p.elem, unsafe.Add(ptr, uintptr(i)*p.elem.size), h)
		}
		return h
	case hkStruct:
		// The common leaves are handled here, saving a call per field.
		for i := range p.fields {
			fd := &p.fields[i]
			fp := unsafe.Add(ptr, fd.off)
			switch fd.kind {
			case hkString:
				h = f.mixString(h, *(*string)(fp))
			case hkInt, hkUint:
				switch fd.size {
				case 1:
					h = mix(h, uint64(*(*uint8)(fp)))
				case 2:
					h = mix(h, uint64(*(*uint16)(fp)))
				case 4:
					h = mix(h, uint64(*(*uint32)(fp)))
				default:
					h = mix(h, *(*uint64)(fp))
				}
			case hkBool:
				if *(*bool)(fp) {
					h = mix(h, 1)
				} else {
					h = mix(h, 2)
				}
			case hkPtr:
				if q := *(*unsafe.Pointer)(fp); q == nil {
					h = mix(h, hashNil)
				} else {
					h = f.walk(fd.plan.elem, q, mix(h, hashPresent))
				}
			case hkSlice:
				if *(*int)(unsafe.Add(fp, unsafe.Sizeof(uintptr(0)))) == 0 {
					h = mix(h, 0)
				} else {
					h = f.walk(fd.plan, fp, h)
				}
			default:
				h = f.walk(fd.plan, fp, h)
			}
		}
		return h
	case hkMap:
		switch p.typ {
		case reflect.TypeFor[map[string]string]():
			return mix(h, f.mapSum(*(*map[string]string)(ptr), false))
		case reflect.TypeFor[v1.ResourceList]():
			return mix(h, f.resourceListSum(*(*v1.ResourceList)(ptr)))
		}
		return mix(h, f.genericMapSum(p, ptr))
	case hkQuantity:
		return f.mixQuantity(h, (*resource.Quantity)(ptr))
	case hkTime:
		t := (*time.Time)(ptr)
		return mix(mix(h, uint64(t.Unix())), uint64(t.Nanosecond()))
	case hkOpaque:
		return mix(h, 0x6f7061717565)
	}
	return h
}

// mixString folds a string: up to 8 bytes directly (with the length, so
// the encoding is one-to-one), longer ones through maphash.
func (f *fingerprinter) mixString(h uint64, s string) uint64 {
	if len(s) <= 7 {
		v := uint64(len(s)) << 56
		for i := 0; i < len(s); i++ {
			v |= uint64(s[i]) << (8 * i)
		}
		return mix(h, v)
	}
	return mix(mix(h, 0xff<<56), maphash.String(f.seed, s))
}

// mixQuantity folds the value and format of q (see the top of this file).
func (f *fingerprinter) mixQuantity(h uint64, q *resource.Quantity) uint64 {
	if q.IsZero() {
		return mix(h, hashNil)
	}
	format := uint64(len(q.Format)) // the formats have distinct lengths
	// Fast path: a value that is a whole number of thousandths (nearly all
	// of them) hashes as that number. Whether it is one depends only on the
	// value, so equal values take the same path.
	if n := q.MilliValue(); q.Cmp(*resource.NewMilliQuantity(n, q.Format)) == 0 {
		return mix(mix(h, uint64(n)), 1<<16|format)
	}
	digits, exp := q.AsCanonicalBytes(f.qbuf[:0])
	if cap(digits) > cap(f.qbuf) {
		f.qbuf = digits[:0]
	}
	h = mix(h, maphash.Bytes(f.seed, digits))
	return mix(h, uint64(uint32(exp))<<24|2<<16|format)
}

// resourceListSum is genericMapSum for the most common map of a spec.
func (f *fingerprinter) resourceListSum(m v1.ResourceList) uint64 {
	if len(m) == 0 {
		return 0
	}
	sum := uint64(len(m)) * hashInit
	for k, q := range m {
		sum += finalize(f.mixQuantity(f.mixString(hashInit, string(k)), &q))
	}
	return sum
}

// genericMapSum folds a map into one number independent of iteration
// order: the sum of a finalized hash per entry, plus the length.
func (f *fingerprinter) genericMapSum(p *hashPlan, ptr unsafe.Pointer) uint64 {
	m := reflect.NewAt(p.typ, ptr).Elem()
	n := m.Len()
	if n == 0 {
		return 0
	}
	iter, kbuf, vbuf := p.iter, p.kbuf, p.vbuf
	if p.scratchInUse { // a map nested in a map of the same type
		iter = new(reflect.MapIter)
		kbuf, vbuf = reflect.New(p.typ.Key()).Elem(), reflect.New(p.typ.Elem()).Elem()
	} else {
		p.scratchInUse = true
		defer func() { p.scratchInUse = false; p.iter.Reset(reflect.Value{}) }()
	}
	iter.Reset(m)
	sum := uint64(n) * hashInit
	for iter.Next() {
		kbuf.SetIterKey(iter)
		vbuf.SetIterValue(iter)
		e := f.walk(p.key, kbuf.Addr().UnsafePointer(), hashInit)
		e = f.walk(p.elem, vbuf.Addr().UnsafePointer(), e)
		sum += finalize(e)
	}
	return sum
}

// mapSum folds a string map into one number independent of iteration
// order; local annotations are skipped when skipLocal.
func (f *fingerprinter) mapSum(m map[string]string, skipLocal bool) uint64 {
	var sum uint64
	n := 0
	for k, v := range m {
		if skipLocal && isLocalAnnotation(k) {
			continue
		}
		n++
		sum += finalize(mix(mix(hashInit, maphash.String(f.seed, k)), maphash.String(f.seed, v)))
	}
	return sum + uint64(n)*hashInit
}

func isLocalAnnotation(k string) bool {
	return k == kubetypes.ConfigSourceAnnotation || k == kubetypes.ConfigSeenAnnotation || k == kubetypes.ConfigMirrorAnnotation
}
