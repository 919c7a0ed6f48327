//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodekit/nodekit"
	"github.com/nodekit/nodekit/clusterapiserver"
	"github.com/nodekit/nodekit/podconfig"
	"github.com/nodekit/nodekit/runtime"
	"github.com/nodekit/nodekit/runtime/remote"
)

// TestClusterAgainstAPIServer runs an in-process agent on containerd joined
// to a real kube-apiserver with the node's credential: the node registers
// and goes Ready; a pod the admin binds to the node runs and reaches
// Running in the API server; deleting it stops its containers and the pod
// object goes away; a static pod shows up as a mirror pod owned by the Node, is replaced when
// deleted, and goes away with its manifest.
func TestClusterAgainstAPIServer(t *testing.T) {
	if os.Getenv("NODEKIT_APISERVER_URL") == "" {
		t.Skip("NODEKIT_APISERVER_URL is not set: start an API server with `bash hack/kube-apiserver.sh build && bash hack/kube-apiserver.sh start` and load its env (set -a; . /tmp/nodekit-apiserver/env; set +a)")
	}
	name := os.Getenv("NODEKIT_NODE_NAME")
	nodeKC, adminKC := os.Getenv("NODEKIT_NODE_KUBECONFIG"), os.Getenv("NODEKIT_ADMIN_KUBECONFIG")
	if name == "" || nodeKC == "" || adminKC == "" {
		t.Fatal("NODEKIT_NODE_NAME, NODEKIT_NODE_KUBECONFIG and NODEKIT_ADMIN_KUBECONFIG must be set with NODEKIT_APISERVER_URL")
	}
	endpoint := os.Getenv("NODEKIT_CRI_ENDPOINT")
	if endpoint == "" {
		t.Fatal("NODEKIT_CRI_ENDPOINT is not set: start containerd with `NODEKIT_CONTAINERD_DIR=/tmp/nkc bash hack/containerd.sh start` and load its env with `set -a; . /tmp/nkc/env; set +a`")
	}
	busybox := getenv("NODEKIT_BUSYBOX_IMAGE", "localhost/nodekit/busybox:1")
	nodeClient := nsClient(t, nodeKC)
	admin := nsClient(t, adminKC)
	ctx := t.Context()

	cri, err := remote.New(remote.Config{Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	if err := cri.Connect(ctx); err != nil {
		t.Fatalf("containerd at %s: %v", endpoint, err)
	}
	t.Cleanup(func() { cri.Close(context.Background()) })

	const apiPod, staticPod = "cluster-api-pod", "cluster-static"
	mirrorName := staticPod + "-" + name
	ours := func(podName string) bool { return podName == apiPod || podName == mirrorName }
	runningContainers := func() map[string]int {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := cri.ListContainers(cctx, &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		})
		if err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
		out := map[string]int{}
		for _, c := range cs {
			if n := c.GetLabels()[runtime.LabelPodName]; ours(n) {
				out[n]++
			}
		}
		return out
	}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = admin.CoreV1().Pods("default").Delete(cctx, apiPod, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		_ = admin.CoreV1().Pods("default").Delete(cctx, mirrorName, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		sbs, err := cri.ListPodSandbox(cctx, nil)
		if err != nil {
			t.Logf("cleanup: ListPodSandbox: %v", err)
			return
		}
		for _, sb := range sbs {
			if !ours(sb.GetMetadata().GetName()) {
				continue
			}
			if err := cri.StopPodSandbox(cctx, sb.Id); err != nil {
				t.Logf("cleanup: StopPodSandbox %s: %v", sb.Id, err)
			}
			if err := cri.RemovePodSandbox(cctx, sb.Id); err != nil {
				t.Logf("cleanup: RemovePodSandbox %s: %v", sb.Id, err)
			}
		}
	})

	// Leftovers of an interrupted run.
	for _, n := range []string{apiPod, mirrorName} {
		_ = admin.CoreV1().Pods("default").Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		nsPoll(t, 30*time.Second, "leftover pod "+n+" gone", func() (bool, string) {
			_, err := admin.CoreV1().Pods("default").Get(ctx, n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}

	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifests, staticPod, manifest(staticPod, busybox, "1"))

	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithManifestDir(manifests).WithRootDir(dir)
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: nodeClient, NodeName: name, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), MirrorPeriod: time.Second, StatusUpdateFrequency: time.Second,
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		select {
		case <-agent.Done():
			if err := agent.Err(); err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return within 30s of the cancel")
		}
	}()
	go agent.Run(runCtx)

	// The node registers and goes Ready: hack/containerd.sh gives the
	// runtime a CNI config, so it reports NetworkReady, and the PLEG is
	// healthy. The reasons are the kubelet's.
	nsPoll(t, 60*time.Second, "node registered and Ready", func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.Status == v1.ConditionTrue && c.Reason == "KubeletReady", string(c.Status) + " " + c.Reason + ": " + c.Message
			}
		}
		return false, "no Ready condition"
	})

	// A pod bound to the node by the admin runs and is reported Running.
	no := false
	grace := int64(2)
	_, err = admin.CoreV1().Pods("default").Create(ctx, &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: apiPod, Namespace: "default"},
		Spec: v1.PodSpec{
			NodeName:                      name,
			HostNetwork:                   true,
			DNSPolicy:                     v1.DNSDefault,
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{
				Name: "main", Image: busybox, ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 90*time.Second, "API pod Running in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, apiPod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				ready = true
			}
		}
		return p.Status.Phase == v1.PodRunning && ready && runningContainers()[apiPod] == 1,
			fmt.Sprintf("phase %q ready %v containers %v", p.Status.Phase, ready, runningContainers())
	})

	// The static pod is mirrored: owned by the Node, Running.
	nsPoll(t, 60*time.Second, "mirror pod of the static pod Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		hash, mirror := p.Annotations[podconfig.ConfigMirrorAnnotation]
		owned := len(p.OwnerReferences) == 1 && p.OwnerReferences[0].Kind == "Node" && p.OwnerReferences[0].Name == name
		return mirror && hash != "" && owned && p.Status.Phase == v1.PodRunning,
			fmt.Sprintf("mirror %v owned %v phase %q", mirror, owned, p.Status.Phase)
	})

	// Deleting the API pod stops its containers and the object goes away.
	if err := admin.CoreV1().Pods("default").Delete(ctx, apiPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 90*time.Second, "deleted pod gone from the API server and containerd", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, apiPod, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err)
		state := "gone"
		if p != nil && err == nil {
			state = string(p.Status.Phase)
		}
		n := runningContainers()[apiPod]
		return gone && n == 0, fmt.Sprintf("api object %s, %d running containers", state, n)
	})
	if n := runningContainers()[mirrorName]; n != 1 {
		t.Errorf("static pod has %d running containers after the API pod was deleted, want 1", n)
	}
	mirror, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("mirror pod: %v", err)
	}

	// Deleting the mirror pod (gracefully) makes the agent replace it; the
	// static pod keeps running.
	if err := admin.CoreV1().Pods("default").Delete(ctx, mirrorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 60*time.Second, "mirror pod replaced", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.UID != mirror.UID && p.DeletionTimestamp == nil, fmt.Sprintf("uid %s deleting %v", p.UID, p.DeletionTimestamp != nil)
	})
	if n := runningContainers()[mirrorName]; n != 1 {
		t.Errorf("static pod has %d running containers after its mirror was replaced, want 1", n)
	}

	// Removing the manifest stops the static pod and deletes its mirror.
	if err := os.Remove(filepath.Join(manifests, staticPod+".yaml")); err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 90*time.Second, "static pod stopped and mirror deleted", func() (bool, string) {
		_, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		n := runningContainers()[mirrorName]
		return apierrors.IsNotFound(err) && n == 0, fmt.Sprintf("mirror: %v, %d running containers", err, n)
	})
}
