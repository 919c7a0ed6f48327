package eviction

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func render(ts []Threshold) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, t.String())
	}
	return strings.Join(parts, "; ")
}

// The kubelet's parsing rules, case by case (TestParseThresholdConfig).
func TestParseThresholds(t *testing.T) {
	cases := []struct {
		name                          string
		hard, soft, grace, minReclaim map[string]string
		want                          string
		wantErr                       string
	}{
		{name: "none", want: ""},
		{name: "all flag values",
			hard:       map[string]string{"memory.available": "150Mi", "nodefs.available": "10%", "nodefs.inodesFree": "5%", "pid.available": "1k"},
			soft:       map[string]string{"memory.available": "300Mi", "imagefs.available": "15.5%"},
			grace:      map[string]string{"memory.available": "30s", "imagefs.available": "1m30s"},
			minReclaim: map[string]string{"memory.available": "0", "nodefs.available": "500Mi", "imagefs.available": "2%"},
			want: "memory.available<150Mi minReclaim=0; nodefs.available<10% minReclaim=500Mi; nodefs.inodesFree<5%; pid.available<1k; " +
				"memory.available<300Mi grace=30s minReclaim=0; imagefs.available<15.5% grace=1m30s minReclaim=2%"},
		{name: "0% and 100% disable", hard: map[string]string{"memory.available": "0%", "nodefs.available": "100%", "pid.available": "10"}, want: "pid.available<10"},
		{name: "0% soft needs no grace", soft: map[string]string{"memory.available": "0%"}, want: ""},
		{name: "unknown signal", hard: map[string]string{"mem.available": "150Mi"}, wantErr: `unsupported eviction signal "mem.available"`},
		{name: "unknown signal in grace", grace: map[string]string{"mem.available": "1s"}, wantErr: "mem.available"},
		{name: "unknown signal in min reclaim", minReclaim: map[string]string{"mem.available": "1"}, wantErr: "mem.available"},
		{name: "negative percent", hard: map[string]string{"memory.available": "-15%"}, wantErr: "memory.available: percentage -15% must be >= 0%"},
		{name: "percent over 100", hard: map[string]string{"memory.available": "101%"}, wantErr: "must be <= 100%"},
		{name: "zero quantity", hard: map[string]string{"memory.available": "0"}, wantErr: "must be positive"},
		{name: "negative quantity", hard: map[string]string{"memory.available": "-150Mi"}, wantErr: "must be positive"},
		{name: "garbage", hard: map[string]string{"memory.available": "mb"}, wantErr: "not a quantity"},
		{name: "soft without grace", soft: map[string]string{"memory.available": "150Mi"}, wantErr: "memory.available: a soft threshold needs a grace period"},
		{name: "negative grace", soft: map[string]string{"memory.available": "150Mi"}, grace: map[string]string{"memory.available": "-30s"}, wantErr: "must not be negative"},
		{name: "bad grace", soft: map[string]string{"memory.available": "150Mi"}, grace: map[string]string{"memory.available": "soon"}, wantErr: "grace period"},
		{name: "negative min reclaim", hard: map[string]string{"memory.available": "1Gi"}, minReclaim: map[string]string{"memory.available": "-1Mi"}, wantErr: "must not be negative"},
		{name: "zero percent min reclaim", minReclaim: map[string]string{"memory.available": "0%"}, wantErr: "minimum reclaim 0%"},
		// What the kubelet gets wrong: these are errors naming the signal.
		{name: "NaN%", hard: map[string]string{"memory.available": "NaN%"}, wantErr: `memory.available: "NaN%" is not a percentage`},
		{name: "Inf%", hard: map[string]string{"nodefs.available": "Inf%"}, wantErr: "nodefs.available"},
		{name: "-Inf%", hard: map[string]string{"nodefs.available": "-Inf%"}, wantErr: "not a percentage"},
		{name: "hex float", hard: map[string]string{"nodefs.available": "0x1p-2%"}, wantErr: "not a percentage"},
		{name: "huge negative exponent", hard: map[string]string{"memory.available": "1e-99999999"}, wantErr: "memory.available: exponent"},
		{name: "huge exponent", hard: map[string]string{"memory.available": "1e400"}, wantErr: "exponent"},
		{name: "too large", hard: map[string]string{"memory.available": "100Ei"}, wantErr: "too large"},
		{name: "too long", hard: map[string]string{"memory.available": strings.Repeat("9", 100)}, wantErr: "bytes long"},
		{name: "min reclaim NaN%", hard: map[string]string{"memory.available": "1Gi"}, minReclaim: map[string]string{"memory.available": "NaN%"}, wantErr: "not a percentage"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.hard, tc.soft, tc.grace, tc.minReclaim)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrInvalidThreshold) {
					t.Fatalf("err = %v, want one containing %q wrapping ErrInvalidThreshold (got %s)", err, tc.wantErr, render(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := render(got); r != tc.want {
				t.Fatalf("got  %s\nwant %s", r, tc.want)
			}
		})
	}
}

func TestParseThresholdsLogsDisabled(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	got, err := ParseThresholdsLogged(zap.New(core), map[string]string{"memory.available": "0%"}, nil, nil, nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("got %v, %v", got, err)
	}
	if logs.FilterMessage("eviction threshold disabled").Len() != 1 {
		t.Fatalf("logs: %v", logs.All())
	}
}

func TestDefaultThresholds(t *testing.T) {
	want := "memory.available<100Mi; nodefs.available<10%; nodefs.inodesFree<5%; imagefs.available<15%; imagefs.inodesFree<5%"
	if got := render(DefaultThresholds()); got != want {
		t.Fatalf("got %s", got)
	}
}

func TestThresholdValueQuantityOf(t *testing.T) {
	ts, err := ParseThresholds(map[string]string{"memory.available": "10%", "pid.available": "2k"}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if q := ts[0].Value.QuantityOf(1000); q != 100 {
		t.Fatalf("10%% of 1000 = %d", q)
	}
	if q := ts[1].Value.QuantityOf(1000); q != 2000 {
		t.Fatalf("2k = %d", q)
	}
}

func FuzzParseThresholds(f *testing.F) {
	for _, s := range []string{"100Mi", "10%", "0%", "100%", "NaN%", "1e-99999999", "-1", "1.5Gi", "1e3", ".5%", "Inf%", "1E", "9223372036854775807"} {
		f.Add(s, "1m")
	}
	f.Fuzz(func(t *testing.T, val, grace string) {
		start := time.Now()
		_, _ = ParseThresholds(
			map[string]string{"memory.available": val},
			map[string]string{"nodefs.available": val},
			map[string]string{"nodefs.available": grace},
			map[string]string{"memory.available": val})
		if d := time.Since(start); d > time.Second {
			t.Fatalf("parsing %q took %v", val, d)
		}
	})
}
