package kubeletconfig

import (
	"errors"
	"testing"
)

// FuzzDecode: any input decodes, or fails with one of the package's
// errors; a decoded configuration defaults and validates without panicking.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		header + "maxPods: 10\n",
		header + "evictionHard: {memory.available: 1Gi}\nreservedSystemCPUs: 0-3\n",
		header + "reservedMemory: [{numaNode: 0, limits: {memory: 1e-99}}]\n",
		header + "featureGates: {AllAlpha: true}\n",
		`{"apiVersion":"kubelet.config.k8s.io/v1beta1","kind":"KubeletConfiguration","port":1}`,
		"a: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrDecode) && !errors.Is(err, ErrWrongKind) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error outside the package's: %v", err)
			}
			return
		}
		SetDefaults(c)
		_ = Validate(c, ValidateOptions{CgroupV1: len(data)%2 == 0})
	})
}
