package fake

import (
	"testing"
	"time"
)

func TestParseBehavior(t *testing.T) {
	good := []struct {
		in   string
		want Behavior
	}{
		{"", Behavior{}},
		{"run=forever", Behavior{}},
		{"exit=1", Behavior{Exits: true, ExitCode: 1}},
		{"exit=1,after=2s", Behavior{Exits: true, ExitCode: 1, After: 2 * time.Second}},
		{"after=1m", Behavior{Exits: true, After: time.Minute}},
		{"sigterm=handle", Behavior{Sigterm: SigtermHandle}},
		{"sigterm=handle:143", Behavior{Sigterm: SigtermHandle, TermExitCode: 143}},
		{" sigterm=ignore , memory=10Mi/s ", Behavior{MemoryGrowth: 10 << 20}},
		{"memory=64Mi", Behavior{MemoryBytes: 64 << 20}},
		{"memory=64Mi+1Mi/s", Behavior{MemoryBytes: 64 << 20, MemoryGrowth: 1 << 20}},
		{"cpu=250m", Behavior{CPUMillicores: 250}},
		{"cpu=2", Behavior{CPUMillicores: 2000}},
	}
	for _, tc := range good {
		p, err := parseBehavior(tc.in)
		if err != nil {
			t.Errorf("parseBehavior(%q): %v", tc.in, err)
			continue
		}
		var got Behavior
		p.apply(&got)
		if got != tc.want {
			t.Errorf("parseBehavior(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
	bad := []string{"exit", "exit=256", "exit=-1", "exit=x", "after=-1s", "after=soon", "sigterm=maybe",
		"sigterm=ignore:1", "sigterm=handle:999", "memory=-1Mi", "memory=1Mi/s+2Mi/s", "memory=NaN", "cpu=1e-99999999",
		"cpu=" + string(make([]byte, 40)), "color=red", "run=once", string(make([]byte, 2000))}
	for _, in := range bad {
		if _, err := parseBehavior(in); err == nil {
			t.Errorf("parseBehavior(%q): no error", in)
		}
	}
}

func TestInterpret(t *testing.T) {
	forever := Behavior{}
	cases := []struct {
		name    string
		cmd     []string
		want    Behavior
		unknown bool
	}{
		{"sleep", []string{"sleep", "10"}, Behavior{Exits: true, After: 10 * time.Second, Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"busybox sleep", []string{"/bin/busybox", "sleep", "1.5"}, Behavior{Exits: true, After: 1500 * time.Millisecond, Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"sleep suffix", []string{"sleep", "2m"}, Behavior{Exits: true, After: 2 * time.Minute, Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"sleep infinity", []string{"sleep", "infinity"}, Behavior{Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"true", []string{"true"}, Behavior{Exits: true}, false},
		{"false", []string{"/bin/false"}, Behavior{Exits: true, ExitCode: 1}, false},
		{"exit", []string{"sh", "-c", "exit 3"}, Behavior{Exits: true, ExitCode: 3}, false},
		{"sleep then exit", []string{"sh", "-c", "echo hi; sleep 2; sleep 3 && exit 7"}, Behavior{Exits: true, ExitCode: 7, After: 5 * time.Second}, false},
		{"script ends", []string{"/bin/sh", "-c", "sleep 4"}, Behavior{Exits: true, After: 4 * time.Second}, false},
		{"script false", []string{"sh", "-c", "sleep 1; false"}, Behavior{Exits: true, ExitCode: 1, After: time.Second}, false},
		{"trap", []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}, Behavior{Exits: true, After: time.Hour, Sigterm: SigtermHandle}, false},
		{"trap code", []string{"sh", "-c", `trap "echo bye; exit 143" SIGTERM; while true; do sleep 1; done`}, Behavior{Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"loop", []string{"sh", "-c", "while true; do sleep 1; done"}, forever, false},
		{"server", []string{"sh", "-c", "httpd -f -p 8080"}, forever, false},
		{"trap ignore", []string{"sh", "-c", "trap '' TERM; sleep 3600"}, Behavior{Exits: true, After: time.Hour}, false},
		{"trap then foreground sleep", []string{"sh", "-c", "trap 'exit 0' TERM; sleep infinity"}, forever, false},
		{"trap with wait", []string{"sh", "-c", "trap 'exit 3' TERM; sleep infinity & wait"}, Behavior{Sigterm: SigtermHandle, TermExitCode: 3}, false},
		{"exec", []string{"sh", "-c", "sleep 1; exec sleep 2"}, Behavior{Exits: true, After: 3 * time.Second, Sigterm: SigtermHandle, TermExitCode: 143}, false},
		{"unbalanced quote", []string{"sh", "-c", "echo 'oops"}, Behavior{}, true},
		{"none", nil, Behavior{}, true},
		{"nginx", []string{"nginx", "-g", "daemon off;"}, Behavior{}, true},
		{"sleep bad", []string{"sleep", "soon"}, Behavior{}, true},
	}
	for _, tc := range cases {
		p, ok := interpret(tc.cmd[:min(1, len(tc.cmd))], tc.cmd[min(1, len(tc.cmd)):])
		if ok == tc.unknown {
			t.Errorf("%s: known=%v, want %v", tc.name, ok, !tc.unknown)
			continue
		}
		var got Behavior
		p.apply(&got)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestBehaviorLayers(t *testing.T) {
	r, _ := newFake(t, Config{ImageBehaviors: map[string]string{"registry.example/app:v1": "exit=2,after=1s,cpu=500m"}})
	sbAnn := map[string]string{BehaviorAnnotation("c"): "memory=1Mi/s,sigterm=handle:143"}
	sb := mustRun(t, r, podConfig("p", true, sbAnn))
	cases := []struct {
		name string
		cfg  func() (string, []string, map[string]string)
		want Behavior
	}{
		{"image table", func() (string, []string, map[string]string) { return "registry.example/app:v1", nil, nil },
			Behavior{Exits: true, ExitCode: 2, After: time.Second, CPUMillicores: 500, MemoryBytes: 2 << 20}},
		{"interpreter over image", func() (string, []string, map[string]string) {
			return "registry.example/app:v1", []string{"sleep", "9"}, nil
		}, Behavior{Exits: true, After: 9 * time.Second, Sigterm: SigtermHandle, TermExitCode: 143, CPUMillicores: 500, MemoryBytes: 2 << 20}},
		{"pause handles", func() (string, []string, map[string]string) { return "registry.k8s.io/pause:3.10", nil, nil },
			Behavior{Sigterm: SigtermHandle, CPUMillicores: 10, MemoryBytes: 2 << 20}},
		{"annotation over all", func() (string, []string, map[string]string) {
			return "busybox", []string{"sleep", "9"}, map[string]string{BehaviorAnnotation("x"): "exit=5,cpu=1"}
		}, Behavior{Exits: true, After: 9 * time.Second, ExitCode: 5, Sigterm: SigtermHandle, TermExitCode: 143, CPUMillicores: 1000, MemoryBytes: 2 << 20}},
	}
	for i, tc := range cases {
		image, cmd, ann := tc.cfg()
		cfg := ctrConfig("x", image, cmd...)
		cfg.Metadata.Attempt = uint32(i)
		cfg.Annotations = ann
		id, err := r.CreateContainer(t.Context(), sb, cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Behavior(id)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v (%v), want %+v", tc.name, got, err, tc.want)
		}
	}
	// The sandbox annotation names container "c".
	id, err := r.CreateContainer(t.Context(), sb, ctrConfig("c", "busybox", "sleep", "5"), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := r.Behavior(id)
	want := Behavior{Exits: true, After: 5 * time.Second, Sigterm: SigtermHandle, TermExitCode: 143, MemoryBytes: 2 << 20, MemoryGrowth: 1 << 20, CPUMillicores: 10}
	if got != want {
		t.Errorf("sandbox annotation: %+v, want %+v", got, want)
	}
	// A bad annotation is an InvalidArgument error naming it.
	bad := ctrConfig("bad", "busybox")
	bad.Annotations = map[string]string{BehaviorAnnotation("bad"): "exit=banana"}
	if _, err := r.CreateContainer(t.Context(), sb, bad, nil); err == nil {
		t.Fatal("bad annotation accepted")
	}
}

func TestNormalizeImage(t *testing.T) {
	for in, want := range map[string]string{
		"busybox":                          "docker.io/library/busybox:latest",
		"busybox:1.36":                     "docker.io/library/busybox:1.36",
		"me/app":                           "docker.io/me/app:latest",
		"registry.k8s.io/pause:3.10":       "registry.k8s.io/pause:3.10",
		"localhost:5000/app":               "localhost:5000/app:latest",
		"localhost/app@sha256:abc":         "localhost/app@sha256:abc",
		"sha256:0123":                      "sha256:0123",
		"docker.io/library/busybox:latest": "docker.io/library/busybox:latest",
	} {
		if got := normalizeImage(in); got != want {
			t.Errorf("normalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}
