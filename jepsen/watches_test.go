package jepsen

import (
	"strings"
	"testing"

	"coord/vocab"
)

// Hand-made histories for the watches checker: no servers.

func ev(at, zxid int64, path string, t vocab.EventType) zxidObs {
	return zxidObs{At: at, Kind: "event", Zxid: zxid, Path: path, Type: int32(t)}
}

func wChange(f, path string, zxid int64) Op {
	return Op{Workload: "watches", F: f, Path: path, Zxid: zxid, Outcome: OK}
}

func wRead(path string, exists bool, mzxid, inv, comp int64) Op {
	op := Op{Workload: "watches", F: "read", Path: path, Outcome: OK, Invoke: inv, Complete: comp}
	if exists {
		op.OutValue, op.Zxid = 1, mzxid
	}
	return op
}

func TestWatchesCheckerPasses(t *testing.T) {
	arms := []watchArm{{Path: "/w", At: 10, Zxid: 0x10}}
	obs := []zxidObs{
		{At: 5, Kind: "connected", Zxid: 0x8},
		ev(20, 0x11, "/w/a", vocab.EventNodeCreated),
		ev(30, 0x12, "/w/a", vocab.EventNodeDataChanged),
		{At: 40, Kind: "connected", Zxid: 0x15}, // 0x13, 0x14 while away: excused
		ev(50, 0x16, "/w/a", vocab.EventNodeDeleted),
		// The session's expiry, sent as an event of type None with zxid 0
		// (a 15-minute run reported it as out of zxid order).
		{At: 60, Kind: "event", Zxid: 0, Type: -1},
	}
	changes := []Op{wChange("create", "/w/a", 0x11), wChange("set", "/w/a", 0x12), wChange("set", "/w/a", 0x13),
		wChange("set", "/w/a", 0x14), wChange("delete", "/w/a", 0x16), wChange("create", "/w/a", 0x17)} // 0x17: after the last event
	reads := []Op{wRead("/w/a", true, 0x12, 31, 35)}
	vs, covered := checkPersistent(1, "/w", arms, obs, reads, changes)
	vs = append(vs, checkEventOrder(1, obs)...)
	if len(vs) != 0 || covered != 3 {
		t.Fatalf("violations %v, covered %d; want none and 3", violationDetails(vs, 10), covered)
	}
	oarms := []watchArm{{Path: "/w/a", At: 10, Exists: true, Mzxid: 0x11}, {Path: "/w/a", At: 40, Exists: true, Mzxid: 0x12}}
	oobs := []zxidObs{ev(30, 0x12, "/w/a", vocab.EventNodeDataChanged)}
	oreads := []Op{wRead("/w/a", true, 0x11, 12, 15), wRead("/w/a", true, 0x12, 31, 35)}
	if vs := checkOneShot(1, oarms, oobs, oreads); len(vs) != 0 {
		t.Fatalf("good one-shot history fails: %v", violationDetails(vs, 10))
	}
}

func TestWatchesCheckerCatchesMissedAndLateEvents(t *testing.T) {
	arms := []watchArm{{Path: "/w", At: 10, Zxid: 0x10}}
	obs := []zxidObs{
		ev(20, 0x11, "/w/a", vocab.EventNodeCreated),
		ev(30, 0x13, "/w/a", vocab.EventNodeDataChanged), // 0x12 skipped
		ev(40, 0x13, "/w/a", vocab.EventNodeDataChanged), // and 0x13 twice
	}
	changes := []Op{wChange("create", "/w/a", 0x11), wChange("set", "/w/a", 0x12), wChange("set", "/w/a", 0x13)}
	reads := []Op{wRead("/w/a", true, 0x13, 21, 25)} // read 0x13 before its event
	vs, _ := checkPersistent(1, "/w", arms, obs, reads, changes)
	var what []string
	for _, v := range vs {
		what = append(what, v.What)
	}
	all := strings.Join(what, "\n")
	for _, want := range []string{"0x12, inside the persistent watch's covered window, was never announced", "announced 2 times", "before the event announcing it"} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %q in:\n%s", want, all)
		}
	}
	if vs := checkEventOrder(1, obs); len(vs) != 1 {
		t.Errorf("order violations %v, want one (0x13 twice)", vs)
	}
	t.Log(strings.Join(violationDetails(vs, 10), "\n"))

	// One-shot: two events for one arming, an event for what the arming
	// read showed, and a read of the change before its event.
	oarms := []watchArm{{Path: "/w/a", At: 10, Exists: true, Mzxid: 0x11}}
	oobs := []zxidObs{ev(30, 0x11, "/w/a", vocab.EventNodeDataChanged), ev(31, 0x12, "/w/a", vocab.EventNodeDataChanged)}
	oreads := []Op{wRead("/w/a", true, 0x12, 20, 25)}
	ovs := checkOneShot(1, oarms, oobs, oreads)
	if len(ovs) != 3 {
		t.Fatalf("one-shot violations %v, want 3", violationDetails(ovs, 10))
	}
}

func TestWatchesCheckerFailedArming(t *testing.T) {
	// A second event after an ExistsW that failed (its watch may be set on
	// the server) is that attempt's, not a duplicate.
	arms := []watchArm{{Path: "/w/a", At: 10}, {Path: "/w/a", At: 25, Failed: true}}
	obs := []zxidObs{ev(20, 0x11, "/w/a", vocab.EventNodeCreated), ev(30, 0x12, "/w/a", vocab.EventNodeDataChanged)}
	if vs := checkOneShot(1, arms, obs, nil); len(vs) != 0 {
		t.Fatalf("violations %v", violationDetails(vs, 10))
	}
	if vs := checkOneShot(1, arms[:1], obs, nil); len(vs) != 1 {
		t.Fatalf("violations %v, want the duplicate", vs)
	}
}
