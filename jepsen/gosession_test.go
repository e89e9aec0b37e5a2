package jepsen

import (
	"strings"
	"testing"
)

// Hand-made histories for the gosessions checker: no servers.

func gsOp(sess int64, f, key string, value, zxid int64, inv, comp int64) Op {
	op := Op{Workload: "gosessions", Session: sess, F: f, Key: key, Outcome: OK, Invoke: inv, Complete: comp, Zxid: zxid}
	if f == "write" {
		op.Value = value
	} else {
		op.OutValue = value
	}
	return op
}

func TestGoSessionsCheckerPasses(t *testing.T) {
	ops := []Op{
		gsOp(1, "write", "k0", 10, 0x100, 10, 20),
		gsOp(1, "read", "k0", 10, 0x100, 30, 40),
		gsOp(2, "write", "k0", 11, 0x105, 35, 45),
		gsOp(1, "read", "k0", 10, 0x100, 50, 60), // 0x105 not yet seen by session 1: allowed
		gsOp(2, "read", "k0", 11, 0x105, 50, 60),
	}
	obs := []zxidObs{
		{At: 1, Session: 1, Server: "a", Kind: "connected", Zxid: 0x90},
		{At: 19, Session: 1, Server: "a", Kind: "response", Zxid: 0x100},
		{At: 39, Session: 1, Server: "a", Kind: "response", Zxid: 0x100},
		{At: 45, Session: 1, Server: "b", Kind: "connected", Zxid: 0x101},
		{At: 59, Session: 1, Server: "b", Kind: "response", Zxid: 0x104},
	}
	if vs := append(checkZxidOrder(ops, obs), checkSessionReads(ops, obs)...); len(vs) != 0 {
		t.Fatalf("good history fails: %v", violationDetails(vs, 10))
	}
}

func TestGoSessionsCheckerCatchesStaleRead(t *testing.T) {
	// Session 1 writes k0 at zxid 0x100, moves to server b, and reads the
	// value from before its write.
	ops := []Op{
		gsOp(1, "write", "k0", 10, 0x100, 10, 20),
		gsOp(2, "write", "k1", 11, 0x101, 10, 20),
		gsOp(1, "read", "k0", 9, 0x90, 50, 60),
	}
	obs := []zxidObs{
		{At: 19, Session: 1, Server: "a", Kind: "response", Zxid: 0x100},
		{At: 45, Session: 1, Server: "b", Kind: "connected", Zxid: 0x100},
	}
	vs := checkSessionReads(ops, obs)
	if len(vs) != 1 || !strings.HasPrefix(vs[0].What, "read-your-writes") {
		t.Fatalf("violations %v, want one read-your-writes", vs)
	}
	d := violationDetails(vs, 10)
	t.Log(strings.Join(d, "\n"))
	if len(vs[0].Sub) != 3 { // the write, the read, the message that raised seen
		t.Errorf("sub-history %v, want the write, the read and the message", vs[0].Sub)
	}
	// Monotonic reads: session 2 read k0's write (seen 0x100), then an
	// older k0.
	ops = []Op{
		gsOp(1, "write", "k0", 10, 0x100, 10, 20),
		gsOp(2, "read", "k0", 10, 0x100, 30, 40),
		gsOp(2, "read", "k0", 9, 0x90, 50, 60),
	}
	if vs := checkSessionReads(ops, nil); len(vs) != 1 || !strings.HasPrefix(vs[0].What, "monotonic reads") {
		t.Fatalf("violations %v, want one monotonic reads", vs)
	}
	// A read whose zxid names a write but whose value is another.
	ops = []Op{gsOp(1, "write", "k0", 10, 0x100, 10, 20), gsOp(2, "read", "k0", 7, 0x100, 30, 40)}
	if vs := checkSessionReads(ops, nil); len(vs) != 1 {
		t.Fatalf("violations %v, want the wrong value", vs)
	}
}

func TestGoSessionsCheckerCatchesZxidGoingBack(t *testing.T) {
	obs := []zxidObs{
		{At: 1, Session: 1, Server: "a", Kind: "connected", Zxid: 0x90},
		{At: 2, Session: 1, Server: "a", Kind: "response", Zxid: 0x100},
		{At: 3, Session: 1, Server: "a", Kind: "event", Zxid: 0x50}, // events are not in this order
		{At: 4, Session: 1, Server: "b", Kind: "connected", Zxid: 0x99},
		{At: 5, Session: 1, Server: "b", Kind: "response", Zxid: 0x101},
	}
	vs := checkZxidOrder(nil, obs)
	if len(vs) != 1 {
		t.Fatalf("violations %v, want one", vs)
	}
	t.Log(strings.Join(violationDetails(vs, 10), "\n"))
	if len(vs[0].Sub) != 2 {
		t.Errorf("sub-history %v, want the two messages", vs[0].Sub)
	}
	ops := []Op{gsOp(1, "write", "k0", 1, 0x100, 10, 20), gsOp(1, "write", "k1", 2, 0x100, 30, 40)}
	if vs := checkZxidOrder(ops, nil); len(vs) != 1 {
		t.Fatalf("violations %v, want the repeated write zxid", vs)
	}
}
