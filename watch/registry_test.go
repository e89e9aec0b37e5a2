package watch

// Trigger rules as table tests. The expectations are Apache ZooKeeper 3.9's
// server (WatchManager.triggerWatch, DataTree.createNode/deleteNode/setData,
// DataTree.addWatch): each row registers watches, fires one trigger and
// states the exact events and the exact watches left.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

const (
	created  = vocab.EventNodeCreated
	deleted  = vocab.EventNodeDeleted
	changed  = vocab.EventNodeDataChanged
	children = vocab.EventNodeChildrenChanged
)

// reg is one registration: kind "d" AddData, "c" AddChild, "p" AddWatch mode
// 0, "r" AddWatch mode 1.
type reg struct {
	s int64
	p string
	k string
}

func register(t *testing.T, r *Registry, regs ...reg) {
	t.Helper()
	for _, g := range regs {
		for _, k := range g.k {
			switch k {
			case 'd':
				r.AddData(g.s, g.p)
			case 'c':
				r.AddChild(g.s, g.p)
			case 'p':
				if err := r.AddWatch(g.s, g.p, vocab.AddWatchPersistent); err != nil {
					t.Fatal(err)
				}
			case 'r':
				if err := r.AddWatch(g.s, g.p, vocab.AddWatchPersistentRecursive); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("bad kind %q", k)
			}
		}
	}
	checkInvariants(t, r)
}

// dump lists the registered watches as "session path kinds", sorted.
func dump(r *Registry) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for p, id := range r.paths {
		for _, w := range r.appendWatchers(nil, &r.ents[id]) {
			out = append(out, fmt.Sprintf("%d %s %s", w.session, p, kindString(w.kinds)))
		}
	}
	slices.Sort(out)
	return out
}

func kindString(k kind) string {
	var b strings.Builder
	for i, c := range "dcpr" {
		if k&(1<<i) != 0 {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// checkInvariants verifies that the path map, the arenas and the session
// index mirror each other and that the counters match them.
func checkInvariants(t *testing.T, r *Registry) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	listed := map[int64]map[uint32]bool{}
	for s, sp := range r.sessions {
		listed[s] = map[uint32]bool{}
		for _, id := range sp.ids {
			if int(id) >= len(r.ents) {
				t.Fatalf("session %d lists id %d of %d", s, id, len(r.ents))
			}
			listed[s][id] = true
		}
	}
	pairs, n, nrec := 0, 0, 0
	for p, id := range r.paths {
		if int(id) >= len(r.ents) {
			t.Fatalf("path %s: id %d of %d", p, id, len(r.ents))
		}
		e := &r.ents[id]
		if e.path != p {
			t.Errorf("path %s: entry %d holds %q", p, id, e.path)
		}
		if r.nwatchers(e) == 0 {
			t.Errorf("path %s: empty entry kept", p)
		}
		if e.crowd != 0 {
			if e.kinds != 0 {
				t.Errorf("path %s: a crowd and an inline watcher", p)
			}
			if c := r.crowds[e.crowd-1]; c == nil || c.len() < 2 {
				t.Errorf("path %s: crowd of fewer than two", p)
			} else if c.m == nil && len(c.list) > crowdList {
				t.Errorf("path %s: crowd list of %d", p, len(c.list))
			}
		}
		var held [4]int32
		for _, w := range r.appendWatchers(nil, e) {
			s, k := w.session, w.kinds
			if k == 0 || k&^kAll != 0 {
				t.Errorf("path %s session %d: kinds %b", p, s, k)
			}
			if l := listed[s]; l == nil {
				t.Errorf("path %s session %d: session not indexed", p, s)
			} else if !l[id] {
				t.Errorf("path %s session %d: missing from the session index", p, s)
			}
			if r.kindsOf(e, s) != k {
				t.Errorf("path %s session %d: kindsOf %b, listed %b", p, s, r.kindsOf(e, s), k)
			}
			pairs++
			for i := range held {
				if k&(1<<i) != 0 {
					held[i]++
					n++
				}
			}
		}
		if e.crowd != 0 && held != r.crowds[e.crowd-1].held {
			t.Errorf("path %s: held %v, counted %v", p, r.crowds[e.crowd-1].held, held)
		}
		for i := range held {
			if r.holds(e, 1<<i) != (held[i] > 0) {
				t.Errorf("path %s: holds(%s) wrong", p, kindString(1<<i))
			}
		}
		nrec += int(held[3])
	}
	free := 0
	for id := range r.ents {
		if e := &r.ents[id]; e.crowd == 0 && e.kinds == 0 {
			free++
			if e.path != "" {
				t.Errorf("free entry %d keeps %q", id, e.path)
			}
		}
	}
	if free != len(r.freeEnts) || len(r.ents)-free != len(r.paths) {
		t.Errorf("%d entries, %d free, %d listed free, %d paths", len(r.ents), free, len(r.freeEnts), len(r.paths))
	}
	crowds := 0
	for _, c := range r.crowds {
		if c != nil {
			crowds++
		}
	}
	if len(r.crowds)-crowds != len(r.freeCrowds) {
		t.Errorf("%d crowds, %d in use, %d listed free", len(r.crowds), crowds, len(r.freeCrowds))
	}
	for _, c := range r.spare {
		if c.len() != 0 || c.held != [4]int32{} || c.m != nil {
			t.Errorf("spare crowd in use: %v %v", c.list, c.held)
		}
		if slices.Contains(r.crowds, c) {
			t.Errorf("spare crowd also in use")
		}
	}
	// The session index may also list fired watches, up to its sweep bound.
	for s, sp := range r.sessions {
		if len(sp.ids) == 0 {
			t.Errorf("session %d: empty list kept", s)
		}
		if len(sp.ids) > 2*sp.floor+8 {
			t.Errorf("session %d: %d ids listed, floor %d: not swept", s, len(sp.ids), sp.floor)
		}
	}
	if pairs != r.pairs || n != r.n || nrec != r.nrec {
		t.Errorf("counters pairs=%d n=%d nrec=%d, counted %d %d %d", r.pairs, r.n, r.nrec, pairs, n, nrec)
	}
}

func ev(s int64, p string, typ vocab.EventType, z int64) Event {
	return Event{Session: s, Path: p, Type: typ, Zxid: z}
}

func sameEvents(t *testing.T, what string, got, want []Event) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: events\n got %v\nwant %v", what, got, want)
	}
}

func sameDump(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: watches left\n got %q\nwant %q", what, got, want)
	}
}

func TestTriggerRules(t *testing.T) {
	const z = 77
	tests := []struct {
		name string
		regs []reg
		path string
		typ  vocab.EventType
		want []int64  // sessions that get an event (path, type and zxid are the trigger's)
		left []string // dump after the trigger
	}{
		// One-shot data watches (getData, exists).
		{"data/changed fires and goes", []reg{{1, "/a", "d"}}, "/a", changed, []int64{1}, nil},
		{"data/created fires (exists on a missing node)", []reg{{1, "/a", "d"}}, "/a", created, []int64{1}, nil},
		{"data/deleted fires and goes", []reg{{1, "/a", "d"}}, "/a", deleted, []int64{1}, nil},
		{"data/children changed ignores it", []reg{{1, "/a", "d"}}, "/a", children, nil, []string{"1 /a d"}},
		{"data/descendant ignored", []reg{{1, "/a", "d"}}, "/a/b", changed, nil, []string{"1 /a d"}},
		{"data/other path ignored", []reg{{1, "/a", "d"}}, "/b", changed, nil, []string{"1 /a d"}},

		// One-shot child watches (getChildren).
		{"child/children changed fires and goes", []reg{{1, "/a", "c"}}, "/a", children, []int64{1}, nil},
		{"child/deleted fires and goes", []reg{{1, "/a", "c"}}, "/a", deleted, []int64{1}, nil},
		{"child/data changed ignores it", []reg{{1, "/a", "c"}}, "/a", changed, nil, []string{"1 /a c"}},
		{"child/created ignores it", []reg{{1, "/a", "c"}}, "/a", created, nil, []string{"1 /a c"}},
		{"child/child created is the parent's children-changed, not this", []reg{{1, "/a", "c"}}, "/a/b", created, nil, []string{"1 /a c"}},

		// Persistent watches: every type on the exact path, and they stay.
		{"persistent/created", []reg{{1, "/a", "p"}}, "/a", created, []int64{1}, []string{"1 /a p"}},
		{"persistent/deleted", []reg{{1, "/a", "p"}}, "/a", deleted, []int64{1}, []string{"1 /a p"}},
		{"persistent/changed", []reg{{1, "/a", "p"}}, "/a", changed, []int64{1}, []string{"1 /a p"}},
		{"persistent/children changed", []reg{{1, "/a", "p"}}, "/a", children, []int64{1}, []string{"1 /a p"}},
		{"persistent/descendant ignored", []reg{{1, "/a", "p"}}, "/a/b", changed, nil, []string{"1 /a p"}},
		{"persistent/descendant created ignored", []reg{{1, "/a", "p"}}, "/a/b", created, nil, []string{"1 /a p"}},

		// Persistent-recursive watches: path and descendants, never children-changed.
		{"recursive/created on path", []reg{{1, "/a", "r"}}, "/a", created, []int64{1}, []string{"1 /a r"}},
		{"recursive/deleted on path", []reg{{1, "/a", "r"}}, "/a", deleted, []int64{1}, []string{"1 /a r"}},
		{"recursive/changed on path", []reg{{1, "/a", "r"}}, "/a", changed, []int64{1}, []string{"1 /a r"}},
		{"recursive/children changed on path ignored", []reg{{1, "/a", "r"}}, "/a", children, nil, []string{"1 /a r"}},
		{"recursive/child created", []reg{{1, "/a", "r"}}, "/a/b", created, []int64{1}, []string{"1 /a r"}},
		{"recursive/grandchild changed", []reg{{1, "/a", "r"}}, "/a/b/c", changed, []int64{1}, []string{"1 /a r"}},
		{"recursive/grandchild deleted", []reg{{1, "/a", "r"}}, "/a/b/c", deleted, []int64{1}, []string{"1 /a r"}},
		{"recursive/descendant children changed ignored", []reg{{1, "/a", "r"}}, "/a/b", children, nil, []string{"1 /a r"}},
		{"recursive/sibling with the same prefix ignored", []reg{{1, "/a", "r"}}, "/ab", created, nil, []string{"1 /a r"}},
		{"recursive/parent ignored", []reg{{1, "/a/b", "r"}}, "/a", changed, nil, []string{"1 /a/b r"}},
		{"recursive/root sees a deep create", []reg{{1, "/", "r"}}, "/x/y/z", created, []int64{1}, []string{"1 / r"}},
		{"recursive/root sees a top-level delete", []reg{{1, "/", "r"}}, "/x", deleted, []int64{1}, []string{"1 / r"}},
		{"recursive/root sees a change of itself", []reg{{1, "/", "r"}}, "/", changed, []int64{1}, []string{"1 / r"}},
		{"recursive/root ignores children changed of itself", []reg{{1, "/", "r"}}, "/", children, nil, []string{"1 / r"}},
		{"recursive/root ignores children changed below", []reg{{1, "/", "r"}}, "/x", children, nil, []string{"1 / r"}},
		{"recursive/ancestor does not consume a one-shot below it",
			[]reg{{1, "/", "r"}, {1, "/a/b", "c"}}, "/a/b", changed, []int64{1}, []string{"1 / r", "1 /a/b c"}},

		// Persistent watch on the root.
		{"persistent root/children changed", []reg{{1, "/", "p"}}, "/", children, []int64{1}, []string{"1 / p"}},
		{"persistent root/changed", []reg{{1, "/", "p"}}, "/", changed, []int64{1}, []string{"1 / p"}},
		{"persistent root/top-level create ignored", []reg{{1, "/", "p"}}, "/a", created, nil, []string{"1 / p"}},

		// One event per session per trigger, whatever matched.
		{"one event/data and child on a deleted node, both go",
			[]reg{{1, "/a", "dc"}}, "/a", deleted, []int64{1}, nil},
		{"one event/every kind on a deleted node, persistent ones stay",
			[]reg{{1, "/a", "dcpr"}}, "/a", deleted, []int64{1}, []string{"1 /a pr"}},
		{"one event/data and persistent, data goes",
			[]reg{{1, "/a", "dp"}}, "/a", changed, []int64{1}, []string{"1 /a p"}},
		{"one event/recursive on two ancestors and a data watch",
			[]reg{{1, "/", "r"}, {1, "/a", "r"}, {1, "/a/b", "d"}}, "/a/b", changed, []int64{1},
			[]string{"1 / r", "1 /a r"}},
		{"one event/children changed takes only the child watch",
			[]reg{{1, "/a", "dc"}}, "/a", children, []int64{1}, []string{"1 /a d"}},
		{"one event/data changed takes only the data watch",
			[]reg{{1, "/a", "dc"}}, "/a", changed, []int64{1}, []string{"1 /a c"}},

		// Several sessions: ascending ids, each rule per session.
		{"sessions/ascending ids",
			[]reg{{30, "/a", "d"}, {7, "/a", "p"}, {1 << 40, "/", "r"}, {12, "/a", "c"}, {-5, "/a", "d"}},
			"/a", changed, []int64{-5, 7, 30, 1 << 40},
			[]string{"1099511627776 / r", "12 /a c", "7 /a p"}},
		{"sessions/deleted: data of one, child of another, both notified once",
			[]reg{{2, "/a", "d"}, {1, "/a", "c"}, {3, "/a/b", "d"}}, "/a", deleted, []int64{1, 2},
			[]string{"3 /a/b d"}},

		{"unknown event type fires nothing", []reg{{1, "/a", "dcpr"}}, "/a", vocab.EventType(0), nil, []string{"1 /a dcpr"}},
		{"nothing registered", nil, "/a", changed, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New()
			register(t, r, tc.regs...)
			got := r.Trigger(fsm.Trigger{Path: tc.path, Type: tc.typ, Zxid: z})
			var want []Event
			for _, s := range tc.want {
				want = append(want, ev(s, tc.path, tc.typ, z))
			}
			sameEvents(t, "trigger", got, want)
			sameDump(t, "trigger", dump(r), tc.left)
			checkInvariants(t, r)
			// A second identical trigger fires only what stayed.
			got = r.Trigger(fsm.Trigger{Path: tc.path, Type: tc.typ, Zxid: z + 1})
			for _, e := range got {
				if !slices.ContainsFunc(tc.left, func(l string) bool { return strings.HasPrefix(l, fmt.Sprint(e.Session)+" ") }) {
					t.Errorf("second trigger notified session %d, which kept no watch", e.Session)
				}
			}
		})
	}
}

// A create fires two triggers (NodeCreated on the node, NodeChildrenChanged on
// the parent) and a delete two (NodeDeleted, then NodeChildrenChanged on the
// parent), as fsm.Apply reports them. Run the pairs through the registry.
func TestTriggerSequences(t *testing.T) {
	r := New()
	register(t, r,
		reg{1, "/a/b", "d"}, // exists on a missing node
		reg{2, "/a", "c"},   // getChildren on the parent
		reg{3, "/a", "r"},   // recursive on the parent
		reg{4, "/", "r"},    // recursive on the root
		reg{5, "/a", "p"},   // persistent on the parent
	)
	var got []Event
	for _, tr := range []fsm.Trigger{
		{Path: "/a/b", Type: created, Zxid: 10},
		{Path: "/a", Type: children, Zxid: 10},
		{Path: "/a/b", Type: changed, Zxid: 11},
		{Path: "/a/b", Type: deleted, Zxid: 12},
		{Path: "/a", Type: children, Zxid: 12},
	} {
		got = append(got, r.Trigger(tr)...)
	}
	want := []Event{
		ev(1, "/a/b", created, 10), ev(3, "/a/b", created, 10), ev(4, "/a/b", created, 10),
		ev(2, "/a", children, 10), ev(5, "/a", children, 10),
		ev(3, "/a/b", changed, 11), ev(4, "/a/b", changed, 11),
		ev(3, "/a/b", deleted, 12), ev(4, "/a/b", deleted, 12),
		ev(5, "/a", children, 12),
	}
	sameEvents(t, "create, set, delete", got, want)
	sameDump(t, "create, set, delete", dump(r), []string{"3 /a r", "4 / r", "5 /a p"})
	checkInvariants(t, r)
}

// fires and survivors must agree: Trigger's fast path relies on it.
func TestFiresAgreesWithSurvivors(t *testing.T) {
	for typ := vocab.EventType(0); typ <= 5; typ++ {
		for k := kind(1); k <= kAll; k++ {
			fire, c := fires(k, typ)
			if want := k &^ survivors(typ); c != want {
				t.Errorf("%v kinds %s: consumes %s, survivors say %s", typ, kindString(k), kindString(c), kindString(want))
			}
			if k&survivors(typ) == 0 && !fire {
				t.Errorf("%v kinds %s: fully consumed without firing", typ, kindString(k))
			}
		}
	}
}

func TestAddIsIdempotentAndKindsCoexist(t *testing.T) {
	r := New()
	register(t, r, reg{1, "/a", "dd"}, reg{1, "/a", "p"}, reg{1, "/a", "d"}, reg{1, "/a", "pr"})
	sameDump(t, "after adds", dump(r), []string{"1 /a dpr"})
	if got := r.Len(); got != 3 {
		t.Errorf("Len = %d, want 3 (d, p, r)", got)
	}
	// A getData on a path with a persistent watch adds a one-shot beside it
	// (ZooKeeper 3.9; 3.8 replaced the persistent mode with the standard one).
	got := r.Trigger(fsm.Trigger{Path: "/a", Type: changed, Zxid: 5})
	sameEvents(t, "first change", got, []Event{ev(1, "/a", changed, 5)})
	sameDump(t, "after first change", dump(r), []string{"1 /a pr"})
	got = r.Trigger(fsm.Trigger{Path: "/a", Type: children, Zxid: 6})
	sameEvents(t, "children changed", got, []Event{ev(1, "/a", children, 6)})
}

func TestAddWatchBadMode(t *testing.T) {
	r := New()
	for _, m := range []vocab.AddWatchMode{-1, 2, 3} {
		if err := r.AddWatch(1, "/a", m); err == nil {
			t.Errorf("AddWatch mode %d: no error", m)
		}
	}
	if r.Len() != 0 {
		t.Errorf("bad modes registered %d watches", r.Len())
	}
}

func TestManySessionsOrdered(t *testing.T) {
	r := New()
	const n = 500
	// Register in a scrambled order so map order cannot pass for sorting.
	for i := range n {
		s := int64((i*7919)%n) - 250
		if i%2 == 0 {
			r.AddData(s, "/hot")
		} else if err := r.AddWatch(s, "/", vocab.AddWatchPersistentRecursive); err != nil {
			t.Fatal(err)
		}
	}
	got := r.Trigger(fsm.Trigger{Path: "/hot", Type: changed, Zxid: 9})
	if len(got) != n {
		t.Fatalf("%d events, want %d", len(got), n)
	}
	for i, e := range got {
		if e.Session != int64(i)-250 || e.Path != "/hot" || e.Type != changed || e.Zxid != 9 {
			t.Fatalf("event %d = %+v", i, e)
		}
	}
	checkInvariants(t, r)
}

// SessionCount counts each kind a session holds on a path once, as Len
// does, through adds, repeats, removals, triggers and the end of another
// session, with and without a per-session bound (which keeps the count
// rather than sweeping for it); it agrees with dump at every step.
func TestSessionCount(t *testing.T) {
	for _, r := range []*Registry{New(), NewLimited(1 << 20)} {
		register(t, r, reg{1, "/a", "dd"}, reg{1, "/a", "cp"}, reg{1, "/b", "d"}, reg{2, "/a", "dr"}, reg{2, "/c", "c"})
		for s, want := range map[int64]int{1: 4, 2: 3, 3: 0} {
			if got := r.SessionCount(s); got != want {
				t.Errorf("limited=%v: SessionCount(%d) = %d, want %d", r.maxPerSession > 0, s, got, want)
			}
		}
		// A change of /a fires the one-shot data watches there: session 1
		// keeps c and p on /a and d on /b, session 2 r on /a and c on /c.
		r.Trigger(fsm.Trigger{Path: "/a", Type: changed, Zxid: 5})
		if got1, got2 := r.SessionCount(1), r.SessionCount(2); got1 != 3 || got2 != 2 {
			t.Errorf("limited=%v: after the change: %d and %d, want 3 and 2", r.maxPerSession > 0, got1, got2)
		}
		r.RemoveSession(1)
		if got := r.SessionCount(1); got != 0 {
			t.Errorf("limited=%v: a removed session holds %d", r.maxPerSession > 0, got)
		}
	}

	// At random, against dump.
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, r := range []*Registry{New(), NewLimited(1 << 20)} {
		paths := []string{"/", "/a", "/a/b", "/a/b/c", "/d", "/e"}
		for step := range 3000 {
			s, p := int64(rnd.IntN(5)), paths[rnd.IntN(len(paths))]
			switch rnd.IntN(10) {
			case 0, 1, 2:
				r.AddData(s, p)
			case 3, 4:
				r.AddChild(s, p)
			case 5:
				r.AddWatch(s, p, vocab.AddWatchMode(rnd.IntN(2)))
			case 6:
				r.Remove(s, p, vocab.WatcherType(1+rnd.IntN(5)))
			case 7, 8:
				r.Trigger(fsm.Trigger{Path: p, Type: vocab.EventType(1 + rnd.IntN(4)), Zxid: int64(step)})
			case 9:
				if rnd.IntN(10) == 0 {
					r.RemoveSession(s)
				}
			}
			want := map[int64]int{}
			for _, line := range dump(r) {
				var ws int64
				var wp, wk string
				fmt.Sscan(line, &ws, &wp, &wk)
				want[ws] += len(wk)
			}
			for s := range int64(5) {
				if got := r.SessionCount(s); got != want[s] {
					t.Fatalf("limited=%v step %d: SessionCount(%d) = %d, dump says %d", r.maxPerSession > 0, step, s, got, want[s])
				}
			}
			checkInvariants(t, r)
		}
	}
}
