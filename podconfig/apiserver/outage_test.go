package apiserver

import (
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodekit/nodekit/kubetypes"
)

// The reflector's retries themselves are not tested here on a synctest
// clock: client-go's error handler keeps a package-level "last error" time
// from the real clock and sleeps on it inside a bubble. The e2e test
// TestClusterAPIServerOutage runs a source with MaxRetryBackoff through an
// API server outage.

func TestRetryBackoff(t *testing.T) {
	if b := retryBackoff(0); b != nil {
		t.Errorf("retryBackoff(0) = %+v, want nil (client-go's)", b)
	}
	if b := retryBackoff(300 * time.Millisecond); b.Duration != 300*time.Millisecond || b.Cap != 300*time.Millisecond {
		t.Errorf("retryBackoff(300ms) = %+v", b)
	}
	if _, err := New(Config{Client: fake.NewClientset(), NodeName: "n", Out: make(chan kubetypes.PodUpdate), MaxRetryBackoff: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("negative MaxRetryBackoff: %v", err)
	}
}
