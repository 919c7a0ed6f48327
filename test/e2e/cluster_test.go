//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kubetypes"
)

// TestClusterAgainstAPIServer runs an in-process agent on containerd joined
// to a real kube-apiserver with the node's credential: the node registers
// and goes Ready; a pod the admin binds to the node runs and reaches
// Running in the API server; deleting it stops its containers and the pod
// object goes away; a static pod shows up as a mirror pod owned by the Node, is replaced when
// deleted, and goes away with its manifest.
func TestClusterAgainstAPIServer(t *testing.T) {
	e := newAPIEnv(t)
	name, endpoint, busybox, nodeClient, admin, cri := e.name, e.endpoint, e.busybox, e.node, e.admin, e.cri
	ctx := t.Context()

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
			if n := c.GetLabels()[kuberuntime.LabelPodName]; ours(n) {
				out[n]++
			}
		}
		return out
	}
	e.removePods(t, apiPod, mirrorName)

	dir, manifests := agentDirs(t)
	writeManifest(t, manifests, staticPod, manifest(staticPod, busybox, "1"))

	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithManifestDir(manifests).WithRootDir(dir)
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: nodeClient, NodeName: name, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)), MirrorPeriod: time.Second, StatusUpdateFrequency: time.Second,
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	// The node registers and goes Ready: hack/containerd.sh gives the
	// runtime a CNI config, so it reports NetworkReady, and the PLEG is
	// healthy. The reasons are the kubelet's.
	waitNodeReady(t, admin, name, 60*time.Second, "node registered and Ready", "KubeletReady")

	// A pod bound to the node by the admin runs and is reported Running.
	_, err = admin.CoreV1().Pods("default").Create(ctx, boundPod(apiPod, name, 2, "", sleeper("main", busybox)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsPoll(t, 90*time.Second, "API pod Running in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, apiPod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := condition(p.Status, v1.PodReady) == v1.ConditionTrue
		return p.Status.Phase == v1.PodRunning && ready && runningContainers()[apiPod] == 1,
			fmt.Sprintf("phase %q ready %v containers %v", p.Status.Phase, ready, runningContainers())
	})

	// The static pod is mirrored: owned by the Node, Running.
	nsPoll(t, 60*time.Second, "mirror pod of the static pod Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, mirrorName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		hash, mirror := p.Annotations[kubetypes.ConfigMirrorAnnotation]
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

// apiServerScript runs hack/kube-apiserver.sh with a command against the
// API server the test environment names (NODEKIT_APISERVER_DIR, else the
// directory of the node kubeconfig, where the script writes it).
func apiServerScript(t *testing.T, cmd string) {
	t.Helper()
	dir := os.Getenv("NODEKIT_APISERVER_DIR")
	if dir == "" {
		dir = filepath.Dir(os.Getenv("NODEKIT_NODE_KUBECONFIG"))
	}
	c := exec.Command("bash", filepath.Join("..", "..", "hack", "kube-apiserver.sh"), cmd)
	c.Env = append(os.Environ(), "NODEKIT_APISERVER_DIR="+dir)
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/kube-apiserver.sh %s: %v\n%s", cmd, err, out)
	}
	t.Logf("hack/kube-apiserver.sh %s: %s", cmd, strings.TrimSpace(string(out)))
}

// TestClusterAPIServerOutage: with an agent on containerd running a pod
// bound to it, kube-apiserver is stopped for a while (etcd and all state
// stay) and started again on the same port. During the outage the pod
// keeps running (same container, no restart) and one of its containers
// exits; once the API server is back the exit shows in the pod's status,
// the lease is renewed within a bounded time, the node status catches up
// with a change made during the outage (a new image tag), and nothing was
// restarted: same sandbox, same container IDs, restart counts 0.
func TestClusterAPIServerOutage(t *testing.T) {
	e := newAPIEnv(t)
	if _, err := exec.LookPath("ctr"); err != nil {
		t.Fatal("ctr (containerd's CLI) is needed to tag an image during the outage")
	}
	name, endpoint, busybox, nodeClient, admin, cri := e.name, e.endpoint, e.busybox, e.node, e.admin, e.cri
	ctx := t.Context()

	const podName, laterPod = "cluster-outage", "cluster-outage-later"
	// The pod source retries at most this far apart (client-go's default
	// would be up to a minute).
	const podWatchBackoff = 5 * time.Second
	// Whatever happens, the API server runs again for the tests after this one.
	t.Cleanup(func() { apiServerScript(t, "start-apiserver") })
	e.removePods(t, podName, laterPod)

	// containers lists the pod's containers in containerd: name -> state, id.
	type ctrState struct {
		id    string
		state runtimeapi.ContainerState
	}
	containers := func() (map[string][]ctrState, string) {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cs, err := cri.ListContainers(cctx, nil)
		if err != nil {
			t.Fatalf("ListContainers: %v", err)
		}
		out := map[string][]ctrState{}
		for _, c := range cs {
			if c.GetLabels()[kuberuntime.LabelPodName] == podName {
				n := c.GetMetadata().GetName()
				out[n] = append(out[n], ctrState{id: c.GetId(), state: c.GetState()})
			}
		}
		return out, fmt.Sprint(out)
	}
	sandboxes := func() []string {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sbs, err := cri.ListPodSandbox(cctx, nil)
		if err != nil {
			t.Fatalf("ListPodSandbox: %v", err)
		}
		var ids []string
		for _, sb := range sbs {
			if sb.GetMetadata().GetName() == podName {
				ids = append(ids, sb.GetId())
			}
		}
		return ids
	}

	dir := t.TempDir()
	b := nodekit.NewBuilder().WithRuntimeEndpoint(endpoint).WithRootDir(dir)
	agent, err := clusterapiserver.Wire(b, clusterapiserver.Config{
		Client: nodeClient, NodeName: name, Logger: zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		MirrorPeriod: time.Second, StatusUpdateFrequency: time.Second, PodWatchMaxBackoff: podWatchBackoff,
	}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer runAgent(t, agent, 30*time.Second)()

	waitNodeReady(t, admin, name, 60*time.Second, "node Ready", "")

	// A pod with a long-running container and one that exits (code 3) on
	// SIGUSR1; restartPolicy Never, so the exit stays an exit.
	_, err = admin.CoreV1().Pods("default").Create(ctx, boundPod(podName, name, 2, v1.RestartPolicyNever, sleeper("main", busybox), v1.Container{
		Name: "side", Image: busybox, ImagePullPolicy: v1.PullNever,
		Command: []string{"sh", "-c", "trap 'exit 3' USR1; trap 'exit 0' TERM; sleep 3600 & wait"},
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var before *v1.Pod
	nsPoll(t, 90*time.Second, "pod Running with both containers running in the API server", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil && cs.Ready {
				running++
			}
		}
		before = p
		return p.Status.Phase == v1.PodRunning && running == 2, fmt.Sprintf("phase %q, %d ready containers", p.Status.Phase, running)
	})
	apiIDs := map[string]string{}
	for _, cs := range before.Status.ContainerStatuses {
		apiIDs[cs.Name] = cs.ContainerID
	}
	cts, state := containers()
	if len(cts["main"]) != 1 || len(cts["side"]) != 1 {
		t.Fatalf("containers in containerd: %s", state)
	}
	mainID, sideID := cts["main"][0].id, cts["side"][0].id
	if apiIDs["main"] != "containerd://"+mainID || apiIDs["side"] != "containerd://"+sideID {
		t.Fatalf("API container IDs %v, containerd main %s side %s", apiIDs, mainID, sideID)
	}
	sbBefore := sandboxes()
	if len(sbBefore) != 1 {
		t.Fatalf("sandboxes before the outage: %v", sbBefore)
	}
	var leaseBefore time.Time
	nsPoll(t, 30*time.Second, "node lease", func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.RenewTime == nil {
			return false, "no renew time"
		}
		leaseBefore = l.Spec.RenewTime.Time
		return true, ""
	})

	// The outage.
	apiServerScript(t, "stop-apiserver")
	down := time.Now()
	if _, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("the API server still answers after stop-apiserver")
	}
	// A container status change: the side container exits with code 3.
	// The exec itself usually dies with the container (exit 137): the
	// poll below checks the container exited.
	if _, stderr, err := cri.ExecSync(ctx, sideID, []string{"kill", "-USR1", "1"}, 10*time.Second); err != nil {
		t.Logf("signalling the side container: %v (%s)", err, stderr)
	}
	// A node status change: a new tag of an image the node has.
	sock := strings.TrimPrefix(endpoint, "unix://")
	tag := fmt.Sprintf("localhost/nodekit/outage:%d", time.Now().UnixNano())
	if out, err := exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "tag", busybox, tag).CombinedOutput(); err != nil {
		t.Fatalf("ctr images tag: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ctr", "-a", sock, "-n", "k8s.io", "images", "rm", tag).Run() })

	// The outage lasts long enough for the lease's back-off to reach its
	// cap (7s) and several status syncs to fail; the pod keeps running.
	const outage = 25 * time.Second
	nsPoll(t, outage+30*time.Second, "side container exited, main running, outage over", func() (bool, string) {
		cts, state := containers()
		ok := len(cts["main"]) == 1 && cts["main"][0].id == mainID && cts["main"][0].state == runtimeapi.ContainerState_CONTAINER_RUNNING
		if !ok {
			t.Fatalf("main container changed during the outage: %s", state)
		}
		exited := len(cts["side"]) == 1 && cts["side"][0].state == runtimeapi.ContainerState_CONTAINER_EXITED
		return exited && time.Since(down) >= outage, state
	})
	if _, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err == nil {
		t.Fatal("the API server answered during the outage")
	}

	apiServerScript(t, "start-apiserver")
	back := time.Now()
	t.Logf("API server was down for %v", back.Sub(down).Round(time.Millisecond))

	// What must catch up, polled together so that each one's time since
	// the return is measured:
	// - the lease: renewal back-off is capped at 7s, so a renewal comes
	//   within about 7s of the return (plus reconnect); allowed 30s;
	// - the pod status: the side container's exit, main still the same
	//   container, nothing restarted;
	// - the node status: the image tag made during the outage.
	leaseOK := func() (bool, string) {
		l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.After(back.Add(-time.Second)), fmt.Sprint("renewTime ", l.Spec.RenewTime)
	}
	podOK := func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, podName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var main, side *v1.ContainerStatus
		for i := range p.Status.ContainerStatuses {
			switch cs := &p.Status.ContainerStatuses[i]; cs.Name {
			case "main":
				main = cs
			case "side":
				side = cs
			}
		}
		if main == nil || side == nil {
			return false, "container statuses missing"
		}
		if main.ContainerID != "containerd://"+mainID || main.RestartCount != 0 || main.State.Running == nil {
			t.Fatalf("main container in the API: %+v, want %s running, restart count 0", main, mainID)
		}
		done := side.State.Terminated != nil && side.State.Terminated.ExitCode == 3 && side.ContainerID == "containerd://"+sideID && side.RestartCount == 0
		return done && p.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %q side %+v", p.Status.Phase, side.State)
	}
	nodeOK := func() (bool, string) {
		n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, img := range n.Status.Images {
			if slices.Contains(img.Names, tag) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d images, without %s", len(n.Status.Images), tag)
	}
	checks := []struct {
		what string
		ok   func() (bool, string)
		took time.Duration
	}{
		{what: "lease renewed", ok: leaseOK},
		{what: "pod status shows the exit made during the outage", ok: podOK},
		{what: "node status lists the image tagged during the outage", ok: nodeOK},
	}
	nsPoll(t, 60*time.Second, "the agent to catch up after the API server returned", func() (bool, string) {
		var pending []string
		for i := range checks {
			c := &checks[i]
			if c.took > 0 {
				continue
			}
			if ok, state := c.ok(); ok {
				c.took = time.Since(back)
			} else {
				pending = append(pending, c.what+": "+state)
			}
		}
		return len(pending) == 0, strings.Join(pending, "; ")
	})
	for _, c := range checks {
		t.Logf("%s %v after the API server returned", c.what, c.took.Round(time.Millisecond))
	}
	if took := checks[0].took; took > 30*time.Second {
		t.Errorf("lease renewed %v after the API server returned, want within 30s", took)
	}
	if l, err := admin.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{}); err == nil && !l.Spec.RenewTime.Time.After(leaseBefore) {
		t.Errorf("lease renew time went from %v to %v", leaseBefore, l.Spec.RenewTime)
	}
	n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady && c.Status != v1.ConditionTrue {
			t.Errorf("node not Ready after the outage: %s %s", c.Reason, c.Message)
		}
	}

	// The pod source is connected again: a pod bound to the node after the
	// return runs (the source retries at least every podWatchBackoff×1.2).
	_, err = admin.CoreV1().Pods("default").Create(ctx, boundPod(laterPod, name, 2, "", sleeper("main", busybox)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	later := nsPollDur(t, 90*time.Second, "a pod created after the return Running", func() (bool, string) {
		p, err := admin.CoreV1().Pods("default").Get(ctx, laterPod, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1.PodRunning, fmt.Sprintf("phase %q", p.Status.Phase)
	})
	t.Logf("a pod created after the return was Running %v later", later.Round(time.Millisecond))
	if later > 45*time.Second {
		t.Errorf("a pod created after the return took %v to run, want well within 45s (pod watch back-off %v)", later, podWatchBackoff)
	}

	// Nothing was restarted: same sandbox, one instance of each container.
	cts, state = containers()
	if len(cts["main"]) != 1 || cts["main"][0].id != mainID || cts["main"][0].state != runtimeapi.ContainerState_CONTAINER_RUNNING ||
		len(cts["side"]) != 1 || cts["side"][0].id != sideID {
		t.Errorf("containers after the outage: %s (main %s, side %s before)", state, mainID, sideID)
	}
	if sb := sandboxes(); !slices.Equal(sb, sbBefore) {
		t.Errorf("sandboxes after the outage %v, before %v", sb, sbBefore)
	}
}

// nsPollDur is nsPoll returning how long the condition took.
func nsPollDur(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	nsPoll(t, timeout, what, cond)
	return time.Since(start)
}
