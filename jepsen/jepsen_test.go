package jepsen

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// TestRun is a short seeded run against three real coord processes with
// kills, restarts, pauses and, as root, partitions: every checker must
// pass.
//
//	go test -v -run TestRun -timeout 10m ./jepsen/
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Voters: 3, Observers: 1, Duration: 25 * time.Second, Seed: 7,
		Nemeses:   []string{"kill", "kill-leader", "restart", "pause", "pause-leader", "partition-minority", "partition-leader"},
		Workloads: []string{"register", "sessions", "sequential", "ryw"},
		Workers:   4, Interval: time.Second, Hold: 1500 * time.Millisecond,
		Dir: t.TempDir(), Log: testLog(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Faults) == 0 {
		t.Errorf("no fault was injected")
	}
	for _, v := range rep.Verdicts {
		t.Logf("%s: %s: %s %v", v.Checker, v.Result, v.Summary, v.Details)
		if v.Result != Pass {
			t.Errorf("checker %s: %s", v.Checker, v.Result)
		}
	}
	for _, n := range rep.Notes {
		t.Logf("note: %s", n)
	}
}

// TestPlantedAckEarly proves the register checker can fail: coord built
// with -tags jepsenplanted and COORD_PLANTED=ackearly acknowledges every
// compare-and-set before it commits, whatever its result, and porcupine
// must find the history not linearizable (and write its visualisation).
//
//	go test -v -run TestPlanted -timeout 10m ./jepsen/
func TestPlantedAckEarly(t *testing.T) {
	if testing.Short() {
		t.Skip("builds coord with a planted bug and runs real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Voters: 3, Duration: 10 * time.Second, Seed: 3,
		Workloads: []string{"register"}, Workers: 4,
		Tags: []string{"jepsenplanted"}, Env: []string{"COORD_PLANTED=ackearly"},
		Dir: t.TempDir(), Log: testLog(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	v, ok := rep.Verdict("register")
	if !ok {
		t.Fatal("no register verdict")
	}
	t.Logf("register: %s: %s %v", v.Result, v.Summary, v.Details)
	if v.Result != Failed {
		t.Fatalf("register checker says %s with acknowledge-early planted; want fail", v.Result)
	}
	if len(v.Files) == 0 {
		t.Errorf("no porcupine visualisation written")
	}
}

// stuckWorkload ignores the end of the run, as a harness bug would.
type stuckWorkload struct{ release chan struct{} }

func (stuckWorkload) Name() string                      { return "stuck" }
func (stuckWorkload) Setup(context.Context, *Env) error { return nil }
func (w stuckWorkload) Run(context.Context, *Env)       { <-w.release }
func (stuckWorkload) Check(context.Context, *Env) Verdict {
	return Verdict{Checker: "stuck", Result: Pass}
}

// A workload that does not stop when the run ends is reported (unknown,
// with a note) and the run still checks the others and reports, instead of
// hanging: the first 30-minute run hung on one (Minority's observer).
func TestStuckWorkloadReported(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real coord process")
	}
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Voters: 1, Duration: 2 * time.Second, Seed: 1, Workloads: []string{"register"}, Workers: 1,
		OpTimeout: 500 * time.Millisecond, Dir: t.TempDir(), Log: testLog(t),
		extraWorkloads: []Workload{stuckWorkload{release}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := rep.Verdict("register")
	stuck, _ := rep.Verdict("stuck")
	if reg.Result != Pass || stuck.Result != Unknown || rep.Valid() {
		t.Fatalf("register %s, stuck %s (%s), valid %v", reg.Result, stuck.Result, stuck.Summary, rep.Valid())
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "workload stuck did not stop") {
		t.Errorf("notes: %v", rep.Notes)
	}
}
