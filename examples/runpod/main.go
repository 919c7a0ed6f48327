// Command runpod runs one pod through nodekit's kuberuntime.Manager and prints its
// status as it goes: the sandbox is created, the init container runs to
// completion, the app containers start, a crashing container is restarted
// with back-off, and at the end the pod is killed within its grace period.
//
// By default it uses the in-memory fake runtime (no root, no containerd):
//
//	go run ./examples/runpod
//
// With --runtime-endpoint it drives a real CRI runtime instead:
//
//	go run ./examples/runpod --runtime-endpoint unix:///run/containerd/containerd.sock --image busybox
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodekit/nodekit/kuberuntime"
	"github.com/nodekit/nodekit/kuberuntime/fake"
	"github.com/nodekit/nodekit/kuberuntime/remote"
	"github.com/nodekit/nodekit/kubetypes"
)

func main() {
	endpoint := flag.String("runtime-endpoint", "", "CRI endpoint (unix:///path); empty runs the in-memory fake runtime")
	image := flag.String("image", "busybox", "image for the pod's containers")
	duration := flag.Duration("duration", 15*time.Second, "how long to keep the pod running before killing it")
	verbose := flag.Bool("v", false, "log what the runtime manager does")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *endpoint, *image, *duration, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "runpod:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, endpoint, image string, duration time.Duration, verbose bool) error {
	log := zap.NewNop()
	if verbose {
		log, _ = zap.NewDevelopment()
	}
	var rt kuberuntime.RuntimeService
	var images kuberuntime.ImageService
	if endpoint == "" {
		f, err := fake.New(fake.Config{Images: []string{image}, Logger: log})
		if err != nil {
			return err
		}
		rt, images = f, f
		fmt.Println("runtime: in-memory fake (use --runtime-endpoint for a real CRI runtime)")
	} else {
		c, err := remote.New(remote.Config{Endpoint: endpoint, Logger: log})
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		if err := c.Connect(ctx); err != nil {
			return err
		}
		rt, images = c, c
		fmt.Println("runtime:", endpoint)
	}
	logs, err := os.MkdirTemp("", "runpod-logs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(logs)

	m, err := kuberuntime.New(kuberuntime.Config{Runtime: rt, Images: images, PodLogsRoot: logs, Logger: log})
	if err != nil {
		return err
	}
	pod := examplePod(image)
	fmt.Printf("pod %s/%s (uid %s)\n\n", pod.Namespace, pod.Name, pod.UID)

	deadline := time.Now().Add(duration)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		res := m.SyncPod(ctx, pod, status, nil)
		status, err = m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return err
		}
		show(m, pod, status, res)
		select {
		case <-ctx.Done():
			deadline = time.Now()
		case <-tick.C:
		}
	}

	fmt.Println("killing the pod (grace period 2s)...")
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	pods, err := m.GetPods(kctx, true)
	if err != nil {
		return err
	}
	start := time.Now()
	for _, p := range pods {
		if p.ID == pod.UID {
			if err := m.KillPod(kctx, pod, p, nil); err != nil {
				return err
			}
		}
	}
	status, err := m.GetPodStatus(kctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return err
	}
	show(m, pod, status, kubetypes.SyncResult{})
	fmt.Printf("killed in %v\n", time.Since(start).Round(10*time.Millisecond))
	return nil
}

func examplePod(image string) *v1.Pod {
	c := func(name string, cmd ...string) v1.Container {
		return v1.Container{Name: name, Image: image, Command: cmd, ImagePullPolicy: v1.PullIfNotPresent}
	}
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "default",
			UID: "9f1c2a4e-runpod-example",
		},
		Spec: v1.PodSpec{
			HostNetwork:                   true,
			DNSPolicy:                     v1.DNSDefault,
			RestartPolicy:                 v1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			InitContainers:                []v1.Container{c("setup", "sh", "-c", "exit 0")},
			Containers: []v1.Container{
				c("server", "sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"),
				c("crasher", "sh", "-c", "sleep 2; exit 1"),
			},
		},
	}
}

func show(m *kuberuntime.Manager, pod *v1.Pod, st *kubetypes.PodStatus, res kubetypes.SyncResult) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "%s\tCONTAINER\tSTATE\tEXIT\tRESTARTS\tREASON\n", time.Now().Format("15:04:05"))
	for _, s := range st.SandboxStatuses {
		fmt.Fprintf(w, "\t(sandbox %s)\t%s\t\t\t\n", short(s.GetId()), strings.TrimPrefix(s.GetState().String(), "SANDBOX_"))
	}
	names := []string{}
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, name := range names {
		cs := st.FindContainerStatusByName(name)
		reason, _ := m.Reason(pod.UID, name)
		if cs == nil {
			fmt.Fprintf(w, "\t%s\t-\t\t\t%s\n", name, reason)
			continue
		}
		exit := ""
		if cs.State == kubetypes.ContainerStateExited {
			exit = fmt.Sprint(cs.ExitCode)
		}
		fmt.Fprintf(w, "\t%s\t%s\t%s\t%d\t%s\n", name, cs.State, exit, cs.RestartCount, reason)
	}
	w.Flush()
	for _, s := range res.Steps {
		if s.Err != nil {
			fmt.Printf("  %s %s: %v\n", s.Action, s.Target, s.Err)
		}
	}
	fmt.Println()
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
