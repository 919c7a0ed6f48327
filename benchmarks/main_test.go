package benchmarks

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// TestMain discards the kubelet packages' klog output (nodekit's side logs
// to zap.NewNop by default): log lines are not what is measured, and the
// kubelet logs at Info level on some of these paths.
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
