package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const traceID = "e8ee95403a051af789300d73b565fa316646583ee0f932fe4950d13a344a9b4a"

func TestReadRuncLog(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "runc.log")
	log := strings.Join([]string{
		"1795739045363550000 1795739045380555000 0 --root /r/k8s.io --log /s/" + traceID + "/log.json --log-format json kill --all " + traceID + " 9",
		"1795739045391182000 1795739045406800000 0 --root /r/k8s.io --log /s/" + traceID + "/log.json --log-format json delete " + traceID,
		"1795739045601024000 1795739045729960000 0 --root /r/k8s.io --log /s/" + traceID + "/log.json --log-format json delete --force " + traceID,
		"garbage line",
		"",
	}, "\n")
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readRuncLog(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kill --all", "delete", "delete --force"}
	if len(got) != len(want) {
		t.Fatalf("got %d calls, want %d: %+v", len(got), len(want), got)
	}
	for i, l := range got {
		if l.cmd != want[i] || l.id != traceID {
			t.Errorf("call %d: cmd %q id %q, want %q %s", i, l.cmd, l.id, want[i], traceID)
		}
	}
	if d := got[0].end.Sub(got[0].start); d != 17005*time.Microsecond {
		t.Errorf("kill took %v, want 17.005ms", d)
	}
}

func TestReadContainerdLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "containerd.log")
	log := `time="2026-11-27T00:05:39.104796549Z" level=info msg="received container exit event container_id:\"` + traceID + `\" id:\"` + traceID + `\" pid:27905 exited_at:{seconds:1795737939 nanos:103882514}"
time="2026-11-27T00:05:39.302296132Z" level=info msg="shim disconnected" id=` + traceID + ` namespace=k8s.io
time="2026-11-27T00:05:39.302389681Z" level=info msg="cleaning up after shim disconnected" id=` + traceID + ` namespace=k8s.io
`
	if err := os.WriteFile(p, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	mon, disc, err := readContainerdLog(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := mon[traceID], time.Date(2026, 11, 27, 0, 5, 39, 104796549, time.UTC); !got.Equal(want) {
		t.Errorf("monitor %v, want %v", got, want)
	}
	if got, want := disc[traceID], time.Date(2026, 11, 27, 0, 5, 39, 302389681, time.UTC); !got.Equal(want) {
		t.Errorf("clean-up %v, want %v", got, want)
	}
}

func TestCtrEventLine(t *testing.T) {
	line := `2026-11-27 00:13:05.493767805 +0000 UTC k8s.io /tasks/delete {"container_id":"` + traceID + `","pid":9804,"exited_at":{"seconds":1795738385,"nanos":491971201}}`
	m := ctrEventLine.FindStringSubmatch(line)
	if m == nil || m[2] != "/tasks/delete" || m[3] != traceID {
		t.Fatalf("no match or wrong fields: %q", m)
	}
	ts, err := time.Parse("2006-01-02 15:04:05.999999999 -0700 MST", m[1])
	if err != nil || !ts.Equal(time.Date(2026, 11, 27, 0, 13, 5, 493767805, time.UTC)) {
		t.Fatalf("time %v, %v", ts, err)
	}
}

func TestTraceRows(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s := exitSample{
		FinishedAt: at(10),
		ReportedAt: at(200),
		Trace: &exitTrace{
			TriggeredAt:      at(0),
			CRIMonitorAt:     at(11),
			CRIEventCreated:  at(180),
			CRIEventReceived: at(181),
			Runc:             []runcCall{{Cmd: "kill --all", Start: at(20), End: at(40)}},
		},
	}
	rows := traceRows([]exitSample{s, {FinishedAt: at(0)}}) // an untraced sample is skipped
	want := map[string]string{
		"FIFO closed -> process exited (finishedAt)":       "10.0ms",
		"runc kill --all (exec to exit)":                   "20.0ms",
		"CRI exit monitor -> CRI event created":            "169.0ms",
		"CRI event received -> agent's pod status (agent)": "19.0ms",
		"finishedAt -> agent's pod status (total)":         "190.0ms",
	}
	for name, d := range want {
		found := false
		for _, r := range rows {
			if strings.HasPrefix(r, name) {
				found = true
				if !strings.Contains(r, "p50 "+strings.Repeat(" ", 8-len(d))+d) || !strings.HasSuffix(r, "(1)") {
					t.Errorf("%s: %q", name, r)
				}
			}
		}
		if !found {
			t.Errorf("no row %q in %q", name, rows)
		}
	}
	for _, r := range rows {
		if strings.HasPrefix(r, "runc delete (exec to exit)") {
			t.Errorf("a row without samples: %q", r)
		}
	}
}
