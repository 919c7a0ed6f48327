package fake

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

var _ utilexec.ExitError = (*ExitError)(nil)

func TestNewValidates(t *testing.T) {
	for field, cfg := range map[string]Config{
		"HostIP":         {HostIP: "not-an-ip"},
		"PodCIDR":        {PodCIDR: "10.0.0.0/33"},
		"CgroupDriver":   {CgroupDriver: "yes"},
		"ImageBehaviors": {ImageBehaviors: map[string]string{"busybox": "exit=nope"}},
		"Images[0]":      {Images: []string{" "}},
	} {
		_, err := New(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: got %v", field, err)
		}
	}
}

func TestVersionStatusConfig(t *testing.T) {
	r, _ := newFake(t, Config{RuntimeName: "containerd", RuntimeVersion: "1.6.20", NetworkNotReady: true})
	v, err := r.Version(t.Context(), "v1")
	if err != nil || v.RuntimeApiVersion != "v1" || v.RuntimeName != "containerd" || v.RuntimeVersion != "1.6.20" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	st, err := r.Status(t.Context(), false)
	if err != nil {
		t.Fatal(err)
	}
	conds := map[string]bool{}
	for _, c := range st.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if !conds[runtimeapi.RuntimeReady] || conds[runtimeapi.NetworkReady] {
		t.Fatalf("conditions %v", conds)
	}
	r.SetNetworkReady(true)
	st, _ = r.Status(t.Context(), false)
	if !st.Status.Conditions[1].Status {
		t.Fatal("SetNetworkReady(true) not reported")
	}
	rc, err := r.RuntimeConfig(t.Context())
	if err != nil || rc.Linux.CgroupDriver != runtimeapi.CgroupDriver_CGROUPFS {
		t.Fatalf("RuntimeConfig = %v, %v", rc, err)
	}
	r2, _ := newFake(t, Config{RuntimeConfigUnimplemented: true})
	_, err = r2.RuntimeConfig(t.Context())
	wantCode(t, err, codes.Unimplemented, ErrUnimplemented)
	_, err = r.Exec(t.Context(), &runtimeapi.ExecRequest{ContainerId: "x"})
	wantCode(t, err, codes.Unimplemented, ErrUnimplemented)
	wantCode(t, r.CheckpointContainer(t.Context(), &runtimeapi.CheckpointContainerRequest{}), codes.Unimplemented, ErrUnimplemented)
	_, err = r.ListPodSandboxMetrics(t.Context())
	wantCode(t, err, codes.Unimplemented, ErrUnimplemented)
}

func TestSandboxLifecycle(t *testing.T) {
	r, fc := newFake(t, Config{HostIP: "192.168.1.5"})
	ctx := t.Context()
	a := mustRun(t, r, podConfig("a", false, nil))
	fc.Step(time.Second)
	b := mustRun(t, r, podConfig("b", false, nil))
	h := mustRun(t, r, podConfig("h", true, nil))
	if len(a) != 64 || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("id %q is not 64 hex chars", a)
	}
	if _, err := r.RunPodSandbox(ctx, podConfig("a", false, nil), ""); err == nil {
		t.Fatal("same name and attempt accepted twice")
	} else {
		wantCode(t, err, codes.AlreadyExists, ErrAlreadyExists)
	}
	ips := map[string]string{}
	for _, id := range []string{a, b, h} {
		resp, err := r.PodSandboxStatus(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Fatalf("state %v", resp.Status.State)
		}
		ips[resp.Status.Metadata.Name] = resp.Status.Network.Ip
	}
	if ips["a"] != "10.88.0.2" || ips["b"] != "10.88.0.3" || ips["h"] != "192.168.1.5" {
		t.Fatalf("ips %v", ips)
	}
	st, _ := r.PodSandboxStatus(ctx, a, false)
	// By default a host-network sandbox reports no IP, as containerd's.
	dflt, _ := newFake(t, Config{})
	hd := mustRun(t, dflt, podConfig("h", true, nil))
	if resp, err := dflt.PodSandboxStatus(ctx, hd, false); err != nil || resp.Status.Network.GetIp() != "" {
		t.Fatalf("default host-network sandbox: ip %q, err %v", resp.GetStatus().GetNetwork().GetIp(), err)
	}
	if st.Status.CreatedAt != t0().UnixNano() {
		t.Fatalf("createdAt %d, want %d", st.Status.CreatedAt, t0().UnixNano())
	}

	c1 := mustStart(t, r, a, ctrConfig("c1", "busybox", "sleep", "3600"))
	c2, _ := r.CreateContainer(ctx, a, ctrConfig("c2", "busybox"), nil)
	if err := r.StopPodSandbox(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.StopPodSandbox(ctx, a); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	wantState(t, ctrStatus(t, r, c1), runtimeapi.ContainerState_CONTAINER_EXITED, 137, "Error")
	wantState(t, ctrStatus(t, r, c2), runtimeapi.ContainerState_CONTAINER_CREATED, 0, "")
	st, _ = r.PodSandboxStatus(ctx, a, false)
	if st.Status.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || len(st.ContainersStatuses) != 2 {
		t.Fatalf("after stop: %v with %d containers", st.Status.State, len(st.ContainersStatuses))
	}
	_, err := r.CreateContainer(ctx, a, ctrConfig("c3", "busybox"), nil)
	wantCode(t, err, codes.FailedPrecondition, ErrFailedPrecondition)
	wantCode(t, r.StartContainer(ctx, c2), codes.FailedPrecondition, ErrFailedPrecondition)

	// Filters.
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	for _, tc := range []struct {
		f    *runtimeapi.PodSandboxFilter
		want int
	}{
		{nil, 3},
		{&runtimeapi.PodSandboxFilter{State: ready}, 2},
		{&runtimeapi.PodSandboxFilter{Id: b[:10]}, 1},
		{&runtimeapi.PodSandboxFilter{Id: "zz"}, 0},
		{&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "h"}}, 1},
		{&runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "h", "x": "y"}}, 0},
		{&runtimeapi.PodSandboxFilter{Id: a, State: ready}, 0},
	} {
		got, err := r.ListPodSandbox(ctx, tc.f)
		if err != nil || len(got) != tc.want {
			t.Errorf("ListPodSandbox(%v) = %d items (%v), want %d", tc.f, len(got), err, tc.want)
		}
	}

	if err := r.RemovePodSandbox(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.RemovePodSandbox(ctx, a); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	_, err = r.PodSandboxStatus(ctx, a, false)
	wantCode(t, err, codes.NotFound, ErrNotFound)
	wantCode(t, r.StopPodSandbox(ctx, a), codes.NotFound, ErrNotFound)
	_, err = r.ContainerStatus(ctx, c1, false)
	wantCode(t, err, codes.NotFound, ErrNotFound)
	if cs, _ := r.ListContainers(ctx, nil); len(cs) != 0 {
		t.Fatalf("%d containers left after RemovePodSandbox", len(cs))
	}
	// The freed IP is reused.
	d := mustRun(t, r, podConfig("d", false, nil))
	st, _ = r.PodSandboxStatus(ctx, d, false)
	if st.Status.Network.Ip != "10.88.0.4" {
		t.Fatalf("next ip %s", st.Status.Network.Ip)
	}
}

func TestNetworkNotReadyAndHandlers(t *testing.T) {
	r, _ := newFake(t, Config{NetworkNotReady: true, RuntimeHandlers: []string{"runc"}})
	if _, err := r.RunPodSandbox(t.Context(), podConfig("p", false, nil), ""); err == nil {
		t.Fatal("pod network sandbox ran with network not ready")
	}
	mustRun(t, r, podConfig("h", true, nil))
	if _, err := r.RunPodSandbox(t.Context(), podConfig("k", true, nil), "kata"); codeOf(err) != codes.NotFound {
		t.Fatalf("unknown handler: %v", err)
	}
	if _, err := r.RunPodSandbox(t.Context(), podConfig("k", true, nil), "runc"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.RunPodSandbox(t.Context(), &runtimeapi.PodSandboxConfig{}, ""); codeOf(err) != codes.InvalidArgument {
		t.Fatalf("no metadata: %v", err)
	}
}

func TestContainerLifecycle(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", false, nil))
	cfg := ctrConfig("app", "busybox", "sleep", "3600")
	cfg.Annotations = map[string]string{"k": "v"}
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/tmp/data"}}
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 1 << 30}}
	id, err := r.CreateContainer(ctx, sb, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Labels["mutated"] = "after create" // our copy must not change
	_, err = r.CreateContainer(ctx, sb, ctrConfig("app", "busybox"), nil)
	wantCode(t, err, codes.AlreadyExists, ErrAlreadyExists)
	_, err = r.CreateContainer(ctx, "nope", ctrConfig("x", "busybox"), nil)
	wantCode(t, err, codes.NotFound, ErrNotFound)

	st := ctrStatus(t, r, id)
	wantState(t, st, runtimeapi.ContainerState_CONTAINER_CREATED, 0, "")
	if st.CreatedAt != t0().UnixNano() || st.StartedAt != 0 || st.Labels["mutated"] != "" || st.Annotations["k"] != "v" ||
		st.LogPath != "/var/log/pods/p/app/0.log" || len(st.Mounts) != 1 || st.Resources.Linux.MemoryLimitInBytes != 1<<30 ||
		st.Image.Image != "busybox" || !strings.HasPrefix(st.ImageRef, "sha256:") {
		t.Fatalf("status %v", st)
	}
	// RemoveContainer of a created container; then a stop of CREATED is a no-op.
	if err := r.StopContainer(ctx, id, 10); err != nil {
		t.Fatal(err)
	}
	fc.Step(2 * time.Second)
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	wantCode(t, r.StartContainer(ctx, id), codes.FailedPrecondition, ErrFailedPrecondition)
	wantCode(t, r.StartContainer(ctx, "missing"), codes.NotFound, ErrNotFound)
	st = ctrStatus(t, r, id)
	wantState(t, st, runtimeapi.ContainerState_CONTAINER_RUNNING, 0, "")
	if st.StartedAt != t0().Add(2*time.Second).UnixNano() {
		t.Fatalf("startedAt %d", st.StartedAt)
	}
	// Unique id prefixes work like ids.
	if st := ctrStatus(t, r, id[:12]); st.Id != id {
		t.Fatalf("prefix lookup gave %s", st.Id)
	}
	if err := r.ReopenContainerLog(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Remove a running container: killed and removed (CRI), or refused.
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	_, err = r.ContainerStatus(ctx, id, false)
	wantCode(t, err, codes.NotFound, ErrNotFound)
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	wantCode(t, r.StopContainer(ctx, id, 0), codes.NotFound, ErrNotFound)

	strict, _ := newFake(t, Config{RemoveRunningFails: true})
	sb2 := mustRun(t, strict, podConfig("p", true, nil))
	id2 := mustStart(t, strict, sb2, ctrConfig("c", "busybox"))
	wantCode(t, strict.RemoveContainer(ctx, id2), codes.FailedPrecondition, ErrFailedPrecondition)
	if err := strict.StopContainer(ctx, id2, 0); err != nil {
		t.Fatal(err)
	}
	if err := strict.RemoveContainer(ctx, id2); err != nil {
		t.Fatal(err)
	}
}

func TestListContainersFilters(t *testing.T) {
	r, _ := newFake(t, Config{})
	ctx := t.Context()
	a := mustRun(t, r, podConfig("a", true, nil))
	b := mustRun(t, r, podConfig("b", true, nil))
	ra := mustStart(t, r, a, ctrConfig("run", "busybox"))
	ca, _ := r.CreateContainer(ctx, a, ctrConfig("created", "busybox"), nil)
	ea := mustStart(t, r, a, ctrConfig("exited", "busybox", "true"))
	rb := mustStart(t, r, b, ctrConfig("run", "busybox"))
	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	for _, tc := range []struct {
		name string
		f    *runtimeapi.ContainerFilter
		want []string
	}{
		{"all", nil, []string{ra, ca, ea, rb}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: a}, []string{ra, ca, ea}},
		{"sandbox prefix", &runtimeapi.ContainerFilter{PodSandboxId: b[:8]}, []string{rb}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{ra, rb}},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{ca}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{ea}},
		{"id", &runtimeapi.ContainerFilter{Id: rb}, []string{rb}},
		{"id prefix", &runtimeapi.ContainerFilter{Id: ea[:6]}, []string{ea}},
		{"id in other sandbox", &runtimeapi.ContainerFilter{Id: rb, PodSandboxId: a}, nil},
		{"label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"io.kubernetes.container.name": "run"}}, []string{ra, rb}},
		{"label and sandbox", &runtimeapi.ContainerFilter{PodSandboxId: b, LabelSelector: map[string]string{"io.kubernetes.container.name": "run"}}, []string{rb}},
		{"unknown sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "nope"}, nil},
	} {
		got, err := r.ListContainers(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range got {
			ids = append(ids, c.Id)
		}
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %d containers, want %d", tc.name, len(ids), len(tc.want))
		}
	}
	got, _ := r.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: rb})
	if c := got[0]; c.PodSandboxId != b || c.Metadata.Name != "run" || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || c.Image.Image != "busybox" {
		t.Fatalf("container %v", c)
	}
}

func TestExecSync(t *testing.T) {
	r, _ := newFake(t, Config{})
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", true, nil))
	id := mustStart(t, r, sb, ctrConfig("c", "busybox"))
	if _, _, err := r.ExecSync(ctx, id, []string{"true"}, time.Second); err != nil {
		t.Fatal(err)
	}
	_, _, err := r.ExecSync(ctx, id, []string{"false"}, time.Second)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 1 {
		t.Fatalf("false: %v", err)
	}
	r.SetExecHandler(func(cid string, cmd []string) ([]byte, []byte, int32, error) {
		if cid != id {
			t.Errorf("handler got id %s", cid)
		}
		if cmd[0] == "boom" {
			return nil, nil, 0, errors.New("exec failed")
		}
		return []byte("out:" + strings.Join(cmd, " ")), []byte("err"), 3, nil
	})
	stdout, stderr, err := r.ExecSync(ctx, id, []string{"cat", "/ready"}, time.Second)
	var fe *ExitError
	if string(stdout) != "out:cat /ready" || string(stderr) != "err" || !errors.As(err, &fe) || fe.Code != 3 {
		t.Fatalf("scripted exec: %q %q %v", stdout, stderr, err)
	}
	if _, _, err := r.ExecSync(ctx, id, []string{"boom"}, time.Second); err == nil || err.Error() != "exec failed" {
		t.Fatalf("handler error: %v", err)
	}
	if err := r.StopContainer(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.ExecSync(ctx, id, []string{"true"}, time.Second)
	wantCode(t, err, codes.FailedPrecondition, ErrFailedPrecondition)
	_, _, err = r.ExecSync(ctx, "nope", []string{"true"}, time.Second)
	wantCode(t, err, codes.NotFound, ErrNotFound)
	if calls := r.Calls(); calls[len(calls)-1].Method != "ExecSync" || calls[len(calls)-1].Name != "true" {
		t.Fatalf("last call %+v", calls[len(calls)-1])
	}
}

func TestSmallAPI(t *testing.T) {
	r, _ := newFake(t, Config{RuntimeHandlers: []string{"runc", "kata"}})
	ctx := t.Context()
	r.SetRuntimeReady(false)
	st, _ := r.Status(ctx, false)
	if st.Status.Conditions[0].Status || st.Status.Conditions[0].Reason == "" {
		t.Fatal("SetRuntimeReady(false) not reported")
	}
	if len(st.RuntimeHandlers) != 3 || st.RuntimeHandlers[1].Name != "kata" || st.RuntimeHandlers[2].Name != "runc" {
		t.Fatalf("handlers %v", st.RuntimeHandlers)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	e := &ExitError{Code: 7}
	if !e.Exited() || e.ExitStatus() != 7 || e.String() != "command terminated with exit code 7" || e.Error() != e.String() {
		t.Fatalf("ExitError %v", e)
	}
	b := Behavior{Exits: true, ExitCode: 1, After: 2 * time.Second, Sigterm: SigtermHandle, TermExitCode: 143, MemoryBytes: 10, MemoryGrowth: 5, CPUMillicores: 250}
	if got := b.String(); got != "exit=1,after=2s,sigterm=handle:143,memory=10+5/s,cpu=250m" {
		t.Fatalf("String %q", got)
	}
	p, err := parseBehavior(b.String())
	var round Behavior
	p.apply(&round)
	if err != nil || round != b {
		t.Fatalf("String does not parse back: %+v %v", round, err)
	}
}

// TestNewReportsEveryProblem: New names every bad field at once.
func TestNewReportsEveryProblem(t *testing.T) {
	_, err := New(Config{HostIP: "nope", PodCIDR: "10.0.0.0/32", CgroupDriver: "x"})
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New = %v, want ErrInvalidConfig", err)
	}
	for _, name := range []string{"HostIP", "PodCIDR", "CgroupDriver"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("New = %v: %s not named", err, name)
		}
	}
}

// TestContainerStatusImageIsRepoTag: as containerd, a container created by
// image ID (as the kubelet creates them) reports the image's first repo
// tag in its status; the listing keeps the config's image.
func TestContainerStatusImageIsRepoTag(t *testing.T) {
	r, _ := newFake(t, Config{Images: []string{"busybox"}})
	ctx := t.Context()
	img, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, false)
	if err != nil || img.Image == nil {
		t.Fatalf("ImageStatus = %v, %v", img, err)
	}
	id := img.Image.Id
	sb := mustRun(t, r, podConfig("p", false, nil))
	c, err := r.CreateContainer(ctx, sb, ctrConfig("app", id), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := ctrStatus(t, r, c)
	if st.Image.Image != "docker.io/library/busybox:latest" || st.ImageRef != id {
		t.Fatalf("status image %q, ref %q; want docker.io/library/busybox:latest, %s", st.Image.Image, st.ImageRef, id)
	}
	if cs, _ := r.ListContainers(ctx, nil); len(cs) != 1 || cs[0].Image.Image != id {
		t.Fatalf("listing %v", cs)
	}
	// Once the image is gone, the status falls back to the config's.
	if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: id}); err != nil {
		t.Fatal(err)
	}
	if st := ctrStatus(t, r, c); st.Image.Image != id {
		t.Fatalf("status image after removal %q, want %s", st.Image.Image, id)
	}
}
