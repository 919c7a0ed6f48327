//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nodekit/nodekit/nodestatus"
	"github.com/nodekit/nodekit/nodestatus/apiserver"
)

// nsKubeconfig is the part of a kubeconfig hack/kube-apiserver.sh writes
// (one cluster, one token user); clientcmd would pull in a dependency the
// module does not have.
type nsKubeconfig struct {
	Clusters []struct {
		Cluster struct {
			Server               string `json:"server"`
			CertificateAuthority string `json:"certificate-authority"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		User struct {
			Token string `json:"token"`
		} `json:"user"`
	} `json:"users"`
}

// restConfig reads a kubeconfig file of hack/kube-apiserver.sh into a
// rest.Config without a timeout (for watches and streams).
func restConfig(t *testing.T, kubeconfig string) *rest.Config {
	t.Helper()
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var kc nsKubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil || len(kc.Clusters) != 1 || len(kc.Users) != 1 {
		t.Fatalf("kubeconfig %s: want one cluster and one user (err %v)", kubeconfig, err)
	}
	return &rest.Config{
		Host:            kc.Clusters[0].Cluster.Server,
		BearerToken:     kc.Users[0].User.Token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: kc.Clusters[0].Cluster.CertificateAuthority},
	}
}

// nsClient builds a clientset from a kubeconfig file, with a 10s timeout.
func nsClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg := restConfig(t, kubeconfig)
	cfg.Timeout = 10 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// nsPoll polls cond every 200ms until it holds or the deadline passes
// (then it checks once more before failing).
func nsPoll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	expired := false
	for {
		ok, state := cond()
		if ok {
			return
		}
		if expired {
			t.Fatalf("timed out after %v waiting for %s; last state: %s", timeout, what, state)
		}
		select {
		case <-deadline.C:
			expired = true
		case <-tick.C:
		}
	}
}

// TestNodeStatusAgainstAPIServer joins a real kube-apiserver (Node
// authorizer + NodeRestriction) as a node with a node identity token: the
// node registers and goes Ready, its Lease is renewed, and once the
// controllers stop the lease goes stale. Pods from the API server, mirror
// pods and pod status are not part of this test yet.
func TestNodeStatusAgainstAPIServer(t *testing.T) {
	e := newAPIClients(t)
	name, nodeClient, admin := e.name, e.node, e.admin
	ctx := t.Context()

	cleanupNode := func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(c, name, metav1.DeleteOptions{})
		_ = admin.CoreV1().Nodes().Delete(c, name, metav1.DeleteOptions{})
	}
	cleanupNode() // a clean start if an earlier run left the node behind
	t.Cleanup(cleanupNode)

	// The node credential really is a node's: NodeRestriction refuses
	// another node's object.
	other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-other"}}
	if _, err := nodeClient.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("creating another node with the node credential: err = %v, want Forbidden", err)
	}

	sink, err := apiserver.NewSink(apiserver.SinkConfig{Client: nodeClient, NodeName: name})
	if err != nil {
		t.Fatal(err)
	}
	machine := nodestatus.MachineReader{}.Read
	ctrl, err := nodestatus.New(nodestatus.Config{
		NodeName: name,
		Sink:     sink,
		Labels:   map[string]string{"nodekit.dev/e2e": "true"},
		Setters: nodestatus.DefaultSetters(nodestatus.SettersConfig{
			Machine: nodestatus.MachineInfoConfig{Machine: machine},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	const leaseSeconds = 8
	lease, err := apiserver.NewLease(apiserver.LeaseConfig{Client: nodeClient, NodeName: name, DurationSeconds: leaseSeconds})
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	go func() { done <- ctrl.Run(runCtx) }()
	go func() { done <- lease.Run(runCtx) }()
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	defer stopAll()

	start := time.Now()
	waitNodeReady(t, admin, name, 60*time.Second, "the node to register and be Ready", "")
	t.Logf("node Ready in the API server after %v", time.Since(start).Round(time.Millisecond))
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["kubernetes.io/os"] == "" || n.Labels["nodekit.dev/e2e"] != "true" {
		t.Errorf("labels = %v", n.Labels)
	}
	if n.Status.Capacity.Cpu().IsZero() || n.Status.Capacity.Memory().IsZero() || n.Status.Capacity.Pods().Value() != 110 {
		t.Errorf("capacity = %v", n.Status.Capacity)
	}
	if n.Status.NodeInfo.BootID == "" || n.Status.NodeInfo.KernelVersion == "" {
		t.Errorf("node info = %+v", n.Status.NodeInfo)
	}

	var first *coordinationv1.Lease
	nsPoll(t, 30*time.Second, "the node lease", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		first = l
		return l.Spec.RenewTime != nil, "no renew time"
	})
	if len(first.OwnerReferences) != 1 || first.OwnerReferences[0].UID != n.UID {
		t.Errorf("lease owner = %+v, want the node (uid %s)", first.OwnerReferences, n.UID)
	}
	if first.Spec.HolderIdentity == nil || *first.Spec.HolderIdentity != name {
		t.Errorf("lease holder = %v", first.Spec.HolderIdentity)
	}
	nsPoll(t, 3*leaseSeconds*time.Second, "the lease to be renewed", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(first.Spec.RenewTime.Time), "renewTime " + l.Spec.RenewTime.String()
	})

	// Stop the agent: the lease is no longer renewed and goes stale.
	stopAll()
	l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := l.Spec.RenewTime.Time
	expiry := last.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	nsPoll(t, 3*leaseSeconds*time.Second, "the lease to expire", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !l.Spec.RenewTime.Time.Equal(last) {
			t.Fatalf("lease renewed after the agent stopped: %v -> %v", last, l.Spec.RenewTime)
		}
		return time.Now().After(expiry), "expires at " + expiry.String()
	})
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal("test context ended early")
	}
}
