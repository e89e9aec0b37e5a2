package watch

// Reattach against a real state machine, as DataTree.setWatches behaves in
// ZooKeeper 3.9: synthetic events carry NoZxid (-1) and come in the order
// data watches, exist watches, child watches; persistent watches are
// registered silently.

import (
	"errors"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

// rig applies commands to an FSM and passes its triggers to a registry, as
// the server's apply loop does.
type rig struct {
	t   *testing.T
	f   *fsm.FSM
	r   *Registry
	now int64
}

func newRig(t *testing.T) *rig {
	return &rig{t: t, f: fsm.New(), r: New(), now: 1_700_000_000_000}
}

// apply applies c and returns the events its triggers delivered and its zxid.
func (g *rig) apply(c fsm.Command) ([]Event, int64) {
	g.t.Helper()
	g.now++
	c.Time = g.now
	res, trig := g.f.Apply(1, &c)
	if res.Err != nil {
		g.t.Fatalf("%v %s: %v", c.Type, c.Op.Path, res.Err)
	}
	var out []Event
	for _, tr := range trig {
		out = append(out, g.r.Trigger(tr)...)
	}
	return out, int64(res.Zxid)
}

func create(path string) fsm.Command {
	return fsm.Command{Type: fsm.CmdCreate, Op: fsm.Op{
		Type: fsm.CmdCreate, Path: path, Data: []byte("x"), ACL: vocab.OpenACLUnsafe, Mode: vocab.ModePersistent}}
}

func setData(path string) fsm.Command {
	return fsm.Command{Type: fsm.CmdSetData, Op: fsm.Op{Type: fsm.CmdSetData, Path: path, Data: []byte("y"), Version: -1}}
}

func del(path string) fsm.Command {
	return fsm.Command{Type: fsm.CmdDelete, Op: fsm.Op{Type: fsm.CmdDelete, Path: path, Version: -1}}
}

func TestReattach(t *testing.T) {
	g := newRig(t)
	for _, p := range []string{"/a", "/b", "/c", "/c/x", "/keep"} {
		g.apply(create(p))
	}
	_, rel := g.apply(create("/seen")) // the last zxid the client saw
	g.apply(setData("/a"))
	g.apply(del("/b"))
	g.apply(create("/d"))
	g.apply(create("/c/y"))
	v := g.f.View()

	got, err := g.r.Reattach(v, 1, rel, WatchSet{
		DataWatches:                []string{"/a", "/b", "/c", "/nope", "/a"},
		ExistWatches:               []string{"/d", "/e"},
		ChildWatches:               []string{"/c", "/b", "/a", "/keep"},
		PersistentWatches:          []string{"/p"},
		PersistentRecursiveWatches: []string{"/c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		ev(1, "/a", changed, NoZxid), // mzxid > relativeZxid
		ev(1, "/b", deleted, NoZxid), // gone
		ev(1, "/nope", deleted, NoZxid),
		ev(1, "/a", changed, NoZxid),  // listed twice, answered twice
		ev(1, "/d", created, NoZxid),  // exists now
		ev(1, "/c", children, NoZxid), // pzxid > relativeZxid
		ev(1, "/b", deleted, NoZxid),
	}
	sameEvents(t, "reattach", got, want)
	sameDump(t, "reattach", dump(g.r), []string{"1 /a c", "1 /c dr", "1 /e d", "1 /keep c", "1 /p p"})
	checkInvariants(t, g.r)

	// The registered watches now fire like any other.
	evs, z := g.apply(create("/e"))
	sameEvents(t, "create /e", evs, []Event{ev(1, "/e", created, z)})
	evs, z = g.apply(setData("/c"))
	sameEvents(t, "set /c (data and recursive watch: one event)", evs, []Event{ev(1, "/c", changed, z)})
	evs, z = g.apply(create("/c/z"))
	sameEvents(t, "create /c/z (recursive only; no child watch on /c)", evs, []Event{ev(1, "/c/z", created, z)})
	evs, z = g.apply(create("/a/k"))
	sameEvents(t, "create /a/k (child watch on /a)", evs, []Event{ev(1, "/a", children, z)})
	evs, _ = g.apply(create("/keep/k"))
	if len(evs) != 1 {
		t.Errorf("create /keep/k: %v", evs)
	}
	sameDump(t, "after changes", dump(g.r), []string{"1 /c r", "1 /p p"})
}

// A node changed exactly at relativeZxid is one the client has seen.
func TestReattachBoundary(t *testing.T) {
	g := newRig(t)
	g.apply(create("/a"))
	_, zSet := g.apply(setData("/a"))
	_, zKid := g.apply(create("/a/k"))
	v := g.f.View()
	for _, tc := range []struct {
		rel  int64
		want []Event
		left []string
	}{
		{zSet - 1, []Event{ev(1, "/a", changed, NoZxid), ev(1, "/a", children, NoZxid)}, nil},
		{zSet, []Event{ev(1, "/a", children, NoZxid)}, []string{"1 /a d"}},
		{zKid, nil, []string{"1 /a dc"}},
	} {
		r := New()
		got, err := r.Reattach(v, 1, tc.rel, WatchSet{DataWatches: []string{"/a"}, ChildWatches: []string{"/a"}})
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, "relativeZxid boundary", got, tc.want)
		sameDump(t, "relativeZxid boundary", dump(r), tc.left)
	}
}

// Changes applied after the view but before Reattach registers: the watches
// behave as if registered at the view, one event per trigger.
func TestReattachReplaysChangesAfterView(t *testing.T) {
	g := newRig(t)
	g.apply(create("/a"))
	_, rel := g.apply(create("/c"))
	v := g.f.View()
	_, z1 := g.apply(setData("/a"))
	_, z2 := g.apply(create("/c/k"))
	_, z3 := g.apply(create("/n"))
	_, z4 := g.apply(setData("/c"))
	got, err := g.r.Reattach(v, 1, rel, WatchSet{
		DataWatches:                []string{"/a", "/c"},
		ExistWatches:               []string{"/n"},
		ChildWatches:               []string{"/c"},
		PersistentWatches:          []string{"/"},
		PersistentRecursiveWatches: []string{"/c"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		ev(1, "/a", changed, z1),
		ev(1, "/c/k", created, z2), // recursive on /c
		ev(1, "/c", children, z2),  // child watch on /c
		ev(1, "/n", created, z3),   // exist watch
		ev(1, "/", children, z3),   // persistent on /
		ev(1, "/c", changed, z4),   // data and recursive on /c: one event
	}
	sameEvents(t, "replay", got, want)
	sameDump(t, "replay", dump(g.r), []string{"1 / p", "1 /c r"})
	checkInvariants(t, g.r)
}

func TestReattachViewTooOld(t *testing.T) {
	g := newRig(t)
	g.apply(create("/a"))
	v := g.f.View()
	for range historyLen + 1 { // one trigger each: the view's successor is forgotten
		g.apply(setData("/a"))
	}
	ws := WatchSet{DataWatches: []string{"/a"}, PersistentWatches: []string{"/"}}
	if _, err := g.r.Reattach(v, 1, 0, ws); !errors.Is(err, ErrViewTooOld) {
		t.Fatalf("err %v, want ErrViewTooOld", err)
	}
	if g.r.Len() != 0 {
		t.Errorf("a refused Reattach registered %d watches", g.r.Len())
	}
	_, last := g.apply(create("/b"))
	got, err := g.r.Reattach(g.f.View(), 1, last, ws)
	if err != nil || got != nil {
		t.Fatalf("fresh view: %v, %v", got, err)
	}
	sameDump(t, "fresh view", dump(g.r), []string{"1 / p", "1 /a d"})
}
