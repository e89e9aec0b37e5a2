package jepsen

import (
	"strings"
	"testing"
)

// Hand-made histories for the lock and queue checkers: no servers.

func TestLockCheckerPasses(t *testing.T) {
	holds := []lockHold{
		{Process: 0, Token: 0x10, LockInvoke: 0, Acquired: 10, Released: 20},
		{Process: 1, Token: 0x12, LockInvoke: 5, Acquired: 25, Released: 40},
		// p1's session was lost while it believed it held the lock: p2
		// may overlap it, but its token must still be larger.
		{Process: 1, Token: 0x14, LockInvoke: 41, Acquired: 45, Released: 90, Lost: true},
		{Process: 2, Token: 0x20, LockInvoke: 42, Acquired: 80, Released: 95},
	}
	vs, excused := checkLock(holds)
	if len(vs) != 0 || excused != 1 {
		t.Fatalf("violations %v, excused %d; want none and 1", violationDetails(vs, 10), excused)
	}
}

func TestLockCheckerCatchesTwoHolders(t *testing.T) {
	holds := []lockHold{
		{Process: 0, Token: 0x10, LockInvoke: 0, Acquired: 10, Released: 50},
		{Process: 1, Token: 0x12, LockInvoke: 5, Acquired: 30, Released: 60},
	}
	vs, _ := checkLock(holds)
	if len(vs) != 1 || !strings.HasPrefix(vs[0].What, "two holders") {
		t.Fatalf("violations %v, want two holders", vs)
	}
	t.Log(strings.Join(violationDetails(vs, 10), "\n"))
	// Fencing: a lost session excuses the overlap, not a smaller token
	// for a later acquisition.
	holds = []lockHold{
		{Process: 0, Token: 0x10, LockInvoke: 0, Acquired: 10, Released: 50, Lost: true},
		{Process: 1, Token: 0x08, LockInvoke: 20, Acquired: 30, Released: 60},
	}
	vs, _ = checkLock(holds)
	if len(vs) != 1 || !strings.HasPrefix(vs[0].What, "fencing") {
		t.Fatalf("violations %v, want fencing", vs)
	}
	holds = []lockHold{{Process: 0, Token: 0x10, Acquired: 10, Released: 20}, {Process: 1, Token: 0x10, Acquired: 30, Released: 40}}
	if vs, _ = checkLock(holds); len(vs) == 0 {
		t.Fatal("a token handed out twice passes")
	}
}

func qOp(f string, out Outcome, value int64) Op {
	op := Op{Workload: "queue", F: f, Outcome: out}
	if f == "enqueue" {
		op.Value = value
	} else {
		op.OutValue = value
	}
	return op
}

func TestQueueCheckerPasses(t *testing.T) {
	ops := []Op{
		qOp("enqueue", OK, 1), qOp("enqueue", OK, 2), qOp("enqueue", Info, 3), qOp("enqueue", Info, 4), qOp("enqueue", OK, 5),
		qOp("dequeue", OK, 1), qOp("dequeue", Fail, 0), qOp("dequeue", OK, 3),
		qOp("dequeue", Info, 0), // may have taken 5
		qOp("dequeue", OK, 2),   // the drain
	}
	if vs := checkQueue(ops); len(vs) != 0 {
		t.Fatalf("good history fails: %v", violationDetails(vs, 10))
	}
}

func TestQueueCheckerCatchesLossAndDuplicates(t *testing.T) {
	lost := []Op{qOp("enqueue", OK, 1), qOp("enqueue", OK, 2), qOp("dequeue", OK, 1)}
	if vs := checkQueue(lost); len(vs) != 1 || !strings.Contains(vs[0].What, "never dequeued") {
		t.Fatalf("violations %v, want a lost item", vs)
	}
	dup := []Op{qOp("enqueue", Info, 1), qOp("dequeue", OK, 1), qOp("dequeue", OK, 1)}
	vs := checkQueue(dup)
	if len(vs) != 1 || !strings.Contains(vs[0].What, "dequeued 2 times") {
		t.Fatalf("violations %v, want a duplicate", vs)
	}
	t.Log(strings.Join(violationDetails(vs, 10), "\n"))
	if len(vs[0].Sub) != 3 {
		t.Errorf("sub-history %v, want the enqueue and both dequeues", vs[0].Sub)
	}
	if vs := checkQueue([]Op{qOp("dequeue", OK, 9)}); len(vs) != 1 {
		t.Fatalf("violations %v, want an item never enqueued", vs)
	}
}

func TestRegisterSubHistory(t *testing.T) {
	ops := []Op{
		{Process: 0, F: "write", Key: "k1", Value: 5, Outcome: OK, OutVersion: 1, Invoke: 0, Complete: 10},
		{Process: 1, F: "read", Key: "k1", Outcome: OK, OutValue: 5, OutVersion: 1, Invoke: 20, Complete: 30},
		{Process: 1, F: "read", Key: "k0", Outcome: OK, OutValue: 0, OutVersion: 0, Invoke: 20, Complete: 30},
		// A stale read of k1 after the write was acknowledged.
		{Process: 2, F: "read", Key: "k1", Outcome: OK, OutValue: 0, OutVersion: 0, Invoke: 40, Complete: 50},
		{Process: 0, F: "write", Key: "k1", Value: 6, Outcome: OK, OutVersion: 2, Invoke: 60, Complete: 70},
	}
	d := registerSubHistory(ops)
	t.Log(strings.Join(d, "\n"))
	if len(d) != 4 || !strings.Contains(d[0], "key k1") { // the headline and k1's first three ops
		t.Fatalf("sub-history %v, want k1 cut after the stale read", d)
	}
	if registerSubHistory(ops[:3]) != nil {
		t.Fatal("a linearizable history has a failing sub-history")
	}
}
