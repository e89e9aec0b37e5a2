package compat

import (
	"errors"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// A multi applies all its ops as one transaction (one zxid), answers each,
// and fires the watches of every op.
func TestMultiSuccess(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	watcher := connect(t, "watcher", cl.Addrs(), clientOpts{})
	acl := zk.WorldACL(zk.PermAll)
	c.create("/w", "", 0)
	c.create("/w/old", "", 0)
	_, _, dataW, err := watcher.GetW("/w")
	must(t, "getW", err)
	_, _, kidsW, err := watcher.ChildrenW("/w")
	must(t, "childrenW", err)
	_, _, oldW, err := watcher.GetW("/w/old")
	must(t, "getW", err)
	_, _, newW, err := watcher.ExistsW("/w/m")
	must(t, "existsW", err)

	res, err := c.Multi(
		&zk.CreateRequest{Path: "/w/m", Data: []byte("a"), Acl: acl},
		&zk.SetDataRequest{Path: "/w/m", Data: []byte("b"), Version: 0},
		&zk.CheckVersionRequest{Path: "/w/m", Version: 1},
		&zk.CreateRequest{Path: "/w/m/s-", Acl: acl, Flags: zk.FlagSequence},
		&zk.CreateRequest{Path: "/w/m/e", Acl: acl, Flags: zk.FlagEphemeral},
		&zk.DeleteRequest{Path: "/w/old", Version: 0},
		&zk.SetDataRequest{Path: "/w", Data: []byte("parent"), Version: -1},
		// Deleting and re-creating in one multi is fine.
		&zk.CreateRequest{Path: "/w/tmp", Acl: acl},
		&zk.DeleteRequest{Path: "/w/tmp", Version: -1},
	)
	must(t, "multi", err)
	if len(res) != 9 {
		t.Fatalf("multi: %d results, want 9: %+v", len(res), res)
	}
	for i, r := range res {
		if r.Error != nil {
			t.Errorf("op %d: %v", i, r.Error)
		}
	}
	if res[0].String != "/w/m" || res[3].String != "/w/m/s-0000000000" || res[4].String != "/w/m/e" || res[7].String != "/w/tmp" {
		t.Errorf("created paths %q %q %q %q", res[0].String, res[3].String, res[4].String, res[7].String)
	}
	if res[1].Stat == nil || res[1].Stat.Version != 1 || res[6].Stat == nil || res[6].Stat.Version != 1 {
		t.Errorf("setData results: %+v %+v", res[1].Stat, res[6].Stat)
	}
	// One transaction, one zxid.
	m := c.stat("/w/m")
	s := c.stat("/w/m/s-0000000000")
	e := c.stat("/w/m/e")
	w := c.stat("/w")
	if m.Czxid != m.Mzxid || s.Czxid != m.Czxid || e.Czxid != m.Czxid || w.Mzxid != m.Czxid || w.Pzxid != m.Czxid || m.Pzxid != m.Czxid {
		t.Errorf("a multi's changes have different zxids: /w/m %+v, seq %+v, eph %+v, /w %+v", m, s, e, w)
	}
	if res[1].Stat.Mzxid != m.Czxid || res[1].Stat.Czxid != m.Czxid {
		t.Errorf("setData result's stat %+v, node's %+v", res[1].Stat, m)
	}
	if e.EphemeralOwner != c.SessionID() || m.NumChildren != 2 || w.NumChildren != 1 {
		t.Errorf("after multi: eph %+v, /w/m %+v, /w %+v", e, m, w)
	}
	if d, _, _ := c.Get("/w/m"); string(d) != "b" {
		t.Errorf("/w/m data %q", d)
	}
	for name, want := range map[string]struct {
		ch  <-chan zk.Event
		typ zk.EventType
	}{
		"/w data": {dataW, zk.EventNodeDataChanged}, "/w children": {kidsW, zk.EventNodeChildrenChanged},
		"/w/old": {oldW, zk.EventNodeDeleted}, "/w/m": {newW, zk.EventNodeCreated},
	} {
		if ev := waitEvent(t, name, want.ch); ev.Type != want.typ {
			t.Errorf("%s: event %+v, want %v", name, ev, want.typ)
		}
	}
	// One NodeChildrenChanged for /w although the multi changed its
	// children three times.
	watcher.barrier()
	if evs := watcher.nodeEvents("/w"); len(evs) != 2 {
		t.Errorf("events for /w: %v, want one data and one child event", evs)
	}

	// An empty multi succeeds and changes nothing.
	res, err = c.Multi()
	if err != nil || len(res) != 0 {
		t.Errorf("empty multi: %+v %v", res, err)
	}
}

// A failed multi changes nothing, fires nothing, and reports each op: OK
// for those before the failure, the failure's code, and
// RuntimeInconsistency for those after.
func TestMultiRollback(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	acl := zk.WorldACL(zk.PermAll)
	c.create("/r", "v0", 0)
	c.create("/r/kid", "", 0)
	c.create("/r/eph", "", zk.FlagEphemeral)
	_, _, dataW, err := c.GetW("/r")
	must(t, "getW", err)
	_, _, kidsW, err := c.ChildrenW("/r")
	must(t, "childrenW", err)
	before := c.stat("/r")

	rtInconsistency := "unknown error: -2" // go-zookeeper has no name for RuntimeInconsistency
	for _, tc := range []struct {
		name string
		ops  []any
		want error // the failing op's error, at index fail
		fail int
	}{
		{"missing node", []any{
			&zk.CreateRequest{Path: "/r/new", Acl: acl},
			&zk.SetDataRequest{Path: "/r", Data: []byte("x"), Version: 0},
			&zk.DeleteRequest{Path: "/r/missing", Version: -1},
			&zk.CreateRequest{Path: "/r/after", Acl: acl},
		}, zk.ErrNoNode, 2},
		{"bad version", []any{
			&zk.SetDataRequest{Path: "/r", Data: []byte("x"), Version: -1},
			&zk.CheckVersionRequest{Path: "/r", Version: 0}, // the set above made it 1
		}, zk.ErrBadVersion, 1},
		{"check a missing node", []any{&zk.CheckVersionRequest{Path: "/r/none", Version: 0}}, zk.ErrNoNode, 0},
		{"node exists", []any{
			&zk.CreateRequest{Path: "/r/x", Acl: acl},
			&zk.CreateRequest{Path: "/r/x", Acl: acl},
		}, zk.ErrNodeExists, 1},
		{"not empty", []any{
			&zk.CreateRequest{Path: "/r/kid/g", Acl: acl},
			&zk.DeleteRequest{Path: "/r/kid", Version: -1},
		}, zk.ErrNotEmpty, 1},
		{"child of an ephemeral", []any{&zk.CreateRequest{Path: "/r/eph/x", Acl: acl}}, zk.ErrNoChildrenForEphemerals, 0},
		{"invalid ACL", []any{
			&zk.DeleteRequest{Path: "/r/kid", Version: -1},
			&zk.CreateRequest{Path: "/r/y", Acl: []zk.ACL{}},
			&zk.CreateRequest{Path: "/r/z", Acl: acl},
		}, zk.ErrInvalidACL, 1},
		{"bad path", []any{
			&zk.CreateRequest{Path: "/r/ok", Acl: acl},
			&zk.CreateRequest{Path: "/r/nul\x00", Acl: acl},
		}, zk.ErrBadArguments, 1},
		{"relative path", []any{&zk.SetDataRequest{Path: "/r", Version: -1}, &zk.CreateRequest{Path: "r/x", Acl: acl}},
			zk.ErrNoNode, 1}, // ZooKeeper looks for the parent ("r") before it checks the path
		{"dot segment", []any{&zk.CreateRequest{Path: "/r/.", Acl: acl}}, zk.ErrBadArguments, 0},
		{"trailing slash", []any{&zk.CreateRequest{Path: "/r/", Acl: acl}}, zk.ErrBadArguments, 0},
		{"delete the root", []any{&zk.DeleteRequest{Path: "/", Version: -1}}, zk.ErrBadArguments, 0},
		{"create the root", []any{&zk.CreateRequest{Path: "/", Acl: acl}}, zk.ErrNodeExists, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.Multi(tc.ops...)
			if !errors.Is(err, tc.want) {
				t.Errorf("multi: err = %v, want %v", err, tc.want)
			}
			if len(res) != len(tc.ops) {
				t.Fatalf("multi: %d results for %d ops: %+v", len(res), len(tc.ops), res)
			}
			for i, r := range res {
				switch {
				case i < tc.fail && r.Error != nil:
					t.Errorf("op %d before the failure: %v, want OK", i, r.Error)
				case i == tc.fail && !errors.Is(r.Error, tc.want):
					t.Errorf("failing op %d: %v, want %v", i, r.Error, tc.want)
				case i > tc.fail && (r.Error == nil || r.Error.Error() != rtInconsistency):
					t.Errorf("op %d after the failure: %v, want RuntimeInconsistency", i, r.Error)
				}
				if r.Stat != nil || r.String != "" {
					t.Errorf("op %d of a failed multi has a result: %+v", i, r)
				}
			}
		})
	}
	c.barrier()
	noEvent(t, "data watch after failed multis", dataW)
	noEvent(t, "child watch after failed multis", kidsW)
	if after := c.stat("/r"); *after != *before {
		t.Errorf("failed multis changed /r: %+v, was %+v", after, before)
	}
	kids, _, err := c.Children("/r")
	must(t, "children", err)
	slices.Sort(kids)
	if !slices.Equal(kids, []string{"eph", "kid"}) {
		t.Errorf("children after failed multis: %v", kids)
	}
	if d, _, _ := c.Get("/r"); string(d) != "v0" {
		t.Errorf("/r data %q", d)
	}
}
