package fake

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type eventLog struct {
	ch     chan *runtimeapi.ContainerEventResponse
	cancel context.CancelFunc
	done   chan error
}

func subscribeEvents(t *testing.T, r *Runtime) *eventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	l := &eventLog{ch: make(chan *runtimeapi.ContainerEventResponse, 100), cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		l.done <- r.GetContainerEvents(ctx, l.ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(ready) })
	}()
	<-ready
	return l
}

func (l *eventLog) next(t *testing.T) *runtimeapi.ContainerEventResponse {
	t.Helper()
	select {
	case ev := <-l.ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
		return nil
	}
}

func TestContainerEvents(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	l := subscribeEvents(t, r)
	sb := mustRun(t, r, podConfig("p", true, nil))
	for _, want := range []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT} {
		if ev := l.next(t); ev.ContainerId != sb || ev.ContainerEventType != want || ev.PodSandboxStatus.Id != sb {
			t.Fatalf("sandbox event %v", ev)
		}
	}
	id := mustStart(t, r, sb, ctrConfig("c", "busybox", "sleep", "10"))
	ev := l.next(t)
	if ev.ContainerId != id || ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT ||
		len(ev.ContainersStatuses) != 1 || ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("created event %v", ev)
	}
	ev = l.next(t)
	if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT || ev.CreatedAt != t0().UnixNano() ||
		ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("started event %v", ev)
	}
	// The process ends on its own: the event comes without anyone polling.
	waitWaiters(t, fc, 1)
	fc.Step(10 * time.Second)
	ev = l.next(t)
	if ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT || ev.CreatedAt != t0().Add(10*time.Second).UnixNano() ||
		ev.ContainersStatuses[0].ExitCode != 0 || ev.ContainersStatuses[0].State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("stopped event %v", ev)
	}
	if err := r.RemoveContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	if ev = l.next(t); ev.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT || len(ev.ContainersStatuses) != 0 {
		t.Fatalf("deleted event %v", ev)
	}
	if err := r.RemovePodSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT} {
		if ev := l.next(t); ev.ContainerId != sb || ev.ContainerEventType != want {
			t.Fatalf("sandbox event %v, want %v", ev, want)
		}
	}
	l.cancel()
	if err := <-l.done; codeOf(err) != codes.Canceled {
		t.Fatalf("GetContainerEvents returned %v", err)
	}

	r2, _ := newFake(t, Config{EventsUnimplemented: true})
	err := r2.GetContainerEvents(ctx, make(chan *runtimeapi.ContainerEventResponse), nil)
	wantCode(t, err, codes.Unimplemented, ErrUnimplemented)
}

func TestEventsSlowReaderDoesNotBlock(t *testing.T) {
	r, _ := newFake(t, Config{})
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan *runtimeapi.ContainerEventResponse) // nobody reads
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		done <- r.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(ready) })
	}()
	<-ready
	for i := range 20 {
		mustRun(t, r, podConfig("p"+string(rune('a'+i)), true, nil))
	}
	cancel()
	if err := <-done; codeOf(err) != codes.Canceled {
		t.Fatal(err)
	}
}

func TestInjectErrorAndCalls(t *testing.T) {
	r, _ := newFake(t, Config{})
	ctx := t.Context()
	sb := mustRun(t, r, podConfig("p", true, nil))
	id, _ := r.CreateContainer(ctx, sb, ctrConfig("c", "busybox"), nil)
	boom := errors.New("boom")
	r.InjectError("StartContainer", boom, 2)
	for range 2 {
		if err := r.StartContainer(ctx, id); !errors.Is(err, boom) {
			t.Fatalf("want injected error, got %v", err)
		}
	}
	if err := r.StartContainer(ctx, id); err != nil {
		t.Fatalf("third call: %v", err)
	}
	if n := r.CountCalls("StartContainer"); n != 3 {
		t.Fatalf("CountCalls = %d", n)
	}
	r.InjectError("ListContainers", boom, -1)
	for range 5 {
		if _, err := r.ListContainers(ctx, nil); !errors.Is(err, boom) {
			t.Fatal("until-cleared error stopped")
		}
	}
	r.ClearFaults()
	if _, err := r.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var starts []Call
	for _, c := range r.Calls() {
		if c.Method == "StartContainer" || c.Method == "CreateContainer" {
			starts = append(starts, c)
		}
	}
	if len(starts) != 4 || starts[0] != (Call{Method: "CreateContainer", ID: sb, Name: "c"}) || starts[3].ID != id {
		t.Fatalf("calls %+v", starts)
	}
	r.ResetCalls()
	if len(r.Calls()) != 0 || r.CountCalls("StartContainer") != 0 {
		t.Fatal("ResetCalls kept calls")
	}
	// A done context fails a call before it does anything.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := r.RunPodSandbox(cctx, podConfig("q", true, nil), ""); codeOf(err) != codes.Canceled {
		t.Fatalf("cancelled ctx: %v", err)
	}
}

func TestCallRecordIsBounded(t *testing.T) {
	r, _ := newFake(t, Config{MaxCalls: 10})
	for range 25 {
		_, _ = r.Version(t.Context(), "v1")
	}
	if n := len(r.Calls()); n > 10 || n < 5 {
		t.Fatalf("%d calls kept", n)
	}
	if r.CountCalls("Version") != 25 {
		t.Fatal("count lost")
	}
	// The default is small: an agent relists twice a second for months.
	r, _ = newFake(t, Config{})
	for range 1000 {
		_, _ = r.Version(t.Context(), "v1")
	}
	if n := len(r.Calls()); n > 256 || n < 128 {
		t.Fatalf("%d calls kept by default, want 128-256", n)
	}
}

func TestInjectDelay(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	r.InjectDelay("Version", 5*time.Second)
	done := make(chan error, 1)
	go func() { _, err := r.Version(ctx, "v1"); done <- err }()
	waitWaiters(t, fc, 1)
	fc.Step(4 * time.Second)
	select {
	case <-done:
		t.Fatal("delay ended early")
	default:
	}
	fc.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// A huge delay is a hang that only ctx ends.
	r.InjectDelay("ListPodSandbox", 1000*time.Hour)
	cctx, cancel := context.WithCancel(ctx)
	go func() { _, err := r.ListPodSandbox(cctx, nil); done <- err }()
	waitWaiters(t, fc, 1)
	cancel()
	if err := <-done; codeOf(err) != codes.Canceled {
		t.Fatalf("cancelled delay: %v", err)
	}
	if fc.HasWaiters() {
		t.Fatal("delay timer left on the clock")
	}
	// Delay and error together: the error comes after the delay.
	r.InjectDelay("Status", time.Second)
	r.InjectError("Status", errors.New("down"), 1)
	go func() { _, err := r.Status(ctx, false); done <- err }()
	waitWaiters(t, fc, 1)
	fc.Step(time.Second)
	if err := <-done; err == nil || err.Error() != "down" {
		t.Fatalf("delayed error: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	r, fc := newFake(t, Config{})
	ctx := t.Context()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "p" + string(rune('a'+i))
			sb, err := r.RunPodSandbox(ctx, podConfig(name, i%2 == 0, nil), "")
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 5 {
				cfg := ctrConfig("c", "busybox", "sleep", "1")
				cfg.Metadata.Attempt = uint32(j)
				id, err := r.CreateContainer(ctx, sb, cfg, nil)
				if err != nil {
					t.Error(err)
					return
				}
				_ = r.StartContainer(ctx, id)
				_, _ = r.ListContainers(ctx, nil)
				_, _ = r.ListPodSandboxStats(ctx, nil)
				fc.Step(time.Second)
				_ = r.StopContainer(ctx, id, 0)
			}
			_ = r.RemovePodSandbox(ctx, sb)
		}()
	}
	wg.Wait()
	if sbs, _ := r.ListPodSandbox(ctx, nil); len(sbs) != 0 {
		t.Fatalf("%d sandboxes left", len(sbs))
	}
}

func TestImages(t *testing.T) {
	r, _ := newFake(t, Config{Images: []string{"busybox", "registry.k8s.io/pause:3.10"}, Missing: []string{"ghost:v1"}})
	ctx := t.Context()
	imgs, _ := r.ListImages(ctx, nil)
	if len(imgs) != 2 {
		t.Fatalf("%d images", len(imgs))
	}
	st, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:latest"}, false)
	if err != nil || st.Image == nil || st.Image.RepoTags[0] != "docker.io/library/busybox:latest" || st.Image.Size == 0 {
		t.Fatalf("ImageStatus(busybox) = %v, %v", st, err)
	}
	byID, _ := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: st.Image.Id}, false)
	if byID.Image == nil || byID.Image.Id != st.Image.Id {
		t.Fatal("lookup by id failed")
	}
	missing, err := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "nginx"}, false)
	if err != nil || missing.Image != nil {
		t.Fatalf("missing image: %v, %v", missing, err)
	}
	auth := &runtimeapi.AuthConfig{Username: "u", Password: "p"}
	ref, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, auth, nil)
	if err != nil || !strings.HasPrefix(ref, "sha256:") {
		t.Fatalf("PullImage = %q, %v", ref, err)
	}
	auth.Username = "changed"
	pulls := r.Pulls()
	if len(pulls) != 1 || pulls[0].Image != "nginx:1.27" || pulls[0].Ref != ref || pulls[0].Auth.GetUsername() != "u" {
		t.Fatalf("pulls %+v", pulls)
	}
	if _, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "ghost:v1"}, nil, nil); !errors.Is(err, ErrPullFailed) || !strings.Contains(err.Error(), "ghost:v1") {
		t.Fatalf("pull of a missing image: %v", err)
	}
	r.SetImageMissing("nginx:1.28", true)
	if _, err := r.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.28"}, nil, nil); err == nil {
		t.Fatal("SetImageMissing ignored")
	}
	fs, err := r.ImageFsInfo(ctx)
	if err != nil || fs.ImageFilesystems[0].UsedBytes.Value != 3*(10<<20) {
		t.Fatalf("ImageFsInfo %v, %v", fs, err)
	}
	if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	if st, _ := r.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "nginx:1.27"}, false); st.Image != nil {
		t.Fatal("removed image still present")
	}

	allow, _ := newFake(t, Config{Pullable: []string{"busybox"}, RequireImages: true})
	if _, err := allow.PullImage(ctx, &runtimeapi.ImageSpec{Image: "nginx"}, nil, nil); err == nil {
		t.Fatal("image outside Pullable pulled")
	}
	sb := mustRun(t, allow, podConfig("p", true, nil))
	_, err = allow.CreateContainer(ctx, sb, ctrConfig("c", "busybox"), nil)
	wantCode(t, err, codes.NotFound, ErrNotFound)
	ref, err = allow.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Created by image id, as the kubelet does, with the user's image name kept.
	cfg := ctrConfig("c", ref)
	cfg.Image.UserSpecifiedImage = "busybox"
	id, err := allow.CreateContainer(ctx, sb, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := ctrStatus(t, allow, id); st.ImageRef != ref || st.Image.UserSpecifiedImage != "busybox" {
		t.Fatalf("status image %v ref %s", st.Image, st.ImageRef)
	}
}
