package kuberuntime

import (
	"hash/fnv"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// hashBuffers recycles the marshal buffers of HashContainer.
type hashBuffers struct{ pool sync.Pool }

func (h *hashBuffers) get(n int) *[]byte {
	if p, ok := h.pool.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

func (h *hashBuffers) put(p *[]byte) { h.pool.Put(p) }

// HashContainer is the 64-bit FNV-1a hash of the container's whole spec in
// its protobuf encoding (deterministic: the generated marshaller writes
// fields in tag order and map keys sorted; no reflection). A running
// container whose recorded hash differs from its spec's is restarted.
func HashContainer(c *v1.Container) uint64 {
	return hashContainer(nil, c)
}

func hashContainer(bufs *hashBuffers, c *v1.Container) uint64 {
	if c == nil {
		return 0
	}
	h := fnv.New64a()
	n := c.Size()
	var p *[]byte
	if bufs != nil {
		p = bufs.get(n)
	} else {
		b := make([]byte, n)
		p = &b
	}
	written, err := c.MarshalToSizedBuffer(*p)
	if err != nil {
		// Can't happen for a well-formed struct; fall back to the identity
		// fields so the hash still changes with name and image.
		_, _ = h.Write([]byte(c.Name + "\x00" + c.Image))
	} else {
		_, _ = h.Write((*p)[len(*p)-written:])
	}
	if bufs != nil {
		bufs.put(p)
	}
	return h.Sum64()
}

// backoffKey identifies one container of one pod for crash-loop back-off.
// Like the kubelet's, it includes the image and the resources, so changing
// either starts a fresh back-off.
func backoffKey(bufs *hashBuffers, pod *v1.Pod, c *v1.Container) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(c.Image))
	n := c.Resources.Size()
	p := bufs.get(n)
	if w, err := c.Resources.MarshalToSizedBuffer(*p); err == nil {
		_, _ = h.Write((*p)[len(*p)-w:])
	}
	bufs.put(p)
	return string(pod.UID) + "/" + pod.Namespace + "/" + pod.Name + "/" + c.Name + "/" + strconv.FormatUint(h.Sum64(), 16)
}
