package jepsen

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDifferential runs a seeded stream of operations on a 3-server coord
// cluster and on Apache ZooKeeper 3.8 and expects every result, Stat and
// watch event to agree.
//
//	go test -v -run TestDifferential -timeout 10m ./jepsen/
func TestDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("runs coord and ZooKeeper processes")
	}
	rep := runDiff(t, DiffConfig{Seed: 1, Ops: 600})
	t.Logf("steps %d, kinds %v, events %d, errors %v", rep.Steps, rep.Kinds, rep.Events, rep.Errors)
	for _, m := range rep.Mismatches {
		t.Errorf("step %d %s:\n  coord:     %s\n  zookeeper: %s", m.Step, m.Op, m.Coord, m.ZooKeeper)
	}
	if rep.Steps != 600 {
		t.Errorf("%d steps, want 600", rep.Steps)
	}
	// The stream must exercise what it claims to compare.
	if rep.Events == 0 || len(rep.Errors) < 4 {
		t.Errorf("too little compared: %d events, errors %v", rep.Events, rep.Errors)
	}
}

// TestDifferentialCanFail plants a wrong version in coord's answer to one
// step (as a server bug would) and expects exactly that step reported.
func TestDifferentialCanFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs coord and ZooKeeper processes")
	}
	planted := -1
	rep := runDiff(t, DiffConfig{Seed: 1, Ops: 200, plant: func(step int, r *diffResult) {
		if planted < 0 && strings.Contains(r.Stat, " v:") && step > 20 {
			planted = step
			r.Stat = strings.Replace(r.Stat, " v:", " v:1", 1)
		}
	}})
	if planted < 0 {
		t.Fatal("no step with a Stat to plant a bug in")
	}
	if len(rep.Mismatches) == 0 || rep.Mismatches[0].Step != planted {
		t.Fatalf("planted a wrong version at step %d; mismatches %+v", planted, rep.Mismatches)
	}
}

func runDiff(t *testing.T, cfg DiffConfig) *DiffReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cfg.Dir, cfg.Log = t.TempDir(), testLog(t)
	rep, err := Differential(ctx, cfg)
	if errors.Is(err, ErrNoZooKeeper) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
