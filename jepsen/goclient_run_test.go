package jepsen

import (
	"context"
	"testing"
	"time"
)

// TestRunGoClient is a short seeded run of the workloads on coord's Go
// client (gosessions, watches, lock, queue, minority) against three real
// coord processes with kills, restarts, pauses and, as root, partitions:
// every checker must pass.
//
//	go test -v -run TestRunGoClient -timeout 10m ./jepsen/
func TestRunGoClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Voters: 3, Duration: 20 * time.Second, Seed: 11,
		Nemeses:   []string{"kill", "kill-leader", "restart", "pause", "pause-leader", "partition-minority", "partition-leader"},
		Workloads: []string{"gosessions", "watches", "lock", "queue", "minority"},
		Workers:   4, Interval: time.Second, Hold: 2500 * time.Millisecond,
		Dir: t.TempDir(), Log: testLog(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Faults) == 0 {
		t.Errorf("no fault was injected")
	}
	for _, f := range rep.Faults {
		t.Logf("fault %.1fs..%.1fs %s: %s %s", secs(f.Start), secs(f.End), f.Nemesis, f.Desc, f.Err)
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
