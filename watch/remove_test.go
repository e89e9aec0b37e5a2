package watch

// removeWatches, checkWatches, session removal and introspection. Remove and
// Contains follow ZooKeeper 3.9's DataTree.removeWatch/containsWatcher
// (ZOOKEEPER-4471, -4472): Children and Data select one-shot watches only.
// ZooKeeper 3.8 differed: Data or Children removed one half of a persistent
// watch, and its containsWatcher answered true for a path any session watched.

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

func TestRemove(t *testing.T) {
	tests := []struct {
		kinds string // what session 1 holds on /a
		which vocab.WatcherType
		want  bool
		left  []string
	}{
		{"d", vocab.WatcherData, true, nil},
		{"d", vocab.WatcherChildren, false, []string{"1 /a d"}},
		{"d", vocab.WatcherAny, true, nil},
		{"d", vocab.WatcherPersistent, false, []string{"1 /a d"}},
		{"c", vocab.WatcherChildren, true, nil},
		{"c", vocab.WatcherData, false, []string{"1 /a c"}},
		{"c", vocab.WatcherAny, true, nil},
		{"p", vocab.WatcherData, false, []string{"1 /a p"}},
		{"p", vocab.WatcherChildren, false, []string{"1 /a p"}},
		{"p", vocab.WatcherPersistent, true, nil},
		{"p", vocab.WatcherPersistentRecursive, false, []string{"1 /a p"}},
		{"p", vocab.WatcherAny, true, nil},
		{"r", vocab.WatcherData, false, []string{"1 /a r"}},
		{"r", vocab.WatcherChildren, false, []string{"1 /a r"}},
		{"r", vocab.WatcherPersistent, false, []string{"1 /a r"}},
		{"r", vocab.WatcherPersistentRecursive, true, nil},
		{"r", vocab.WatcherAny, true, nil},
		{"dp", vocab.WatcherData, true, []string{"1 /a p"}},
		{"dp", vocab.WatcherPersistent, true, []string{"1 /a d"}},
		{"dc", vocab.WatcherChildren, true, []string{"1 /a d"}},
		{"dcpr", vocab.WatcherAny, true, nil},
		{"dcpr", vocab.WatcherPersistentRecursive, true, []string{"1 /a dcp"}},
		{"dcpr", vocab.WatcherType(0), false, []string{"1 /a dcpr"}},
		{"dcpr", vocab.WatcherType(6), false, []string{"1 /a dcpr"}},
	}
	for _, tc := range tests {
		t.Run(tc.kinds+"/"+tc.which.String(), func(t *testing.T) {
			r := New()
			register(t, r, reg{1, "/a", tc.kinds}, reg{2, "/a", "dcpr"}, reg{1, "/b", "dcpr"})
			if got := r.Contains(1, "/a", tc.which); got != tc.want {
				t.Errorf("Contains = %v, want %v", got, tc.want)
			}
			if got := r.Remove(1, "/a", tc.which); got != tc.want {
				t.Errorf("Remove = %v, want %v", got, tc.want)
			}
			left := append(slices.Clone(tc.left), "1 /b dcpr", "2 /a dcpr")
			slices.Sort(left)
			sameDump(t, "remove", dump(r), left)
			checkInvariants(t, r)
			if tc.want && r.Contains(1, "/a", tc.which) {
				t.Errorf("Contains after Remove = true")
			}
			if tc.want && r.Remove(1, "/a", tc.which) {
				t.Errorf("second Remove = true")
			}
		})
	}
}

// Another session's watch, or a watch on another path, is never a match.
func TestRemoveAndContainsAreScoped(t *testing.T) {
	r := New()
	register(t, r, reg{2, "/a", "dcpr"}, reg{1, "/a/b", "dcpr"}, reg{1, "/", "r"})
	for _, w := range []vocab.WatcherType{vocab.WatcherChildren, vocab.WatcherData, vocab.WatcherAny, vocab.WatcherPersistent, vocab.WatcherPersistentRecursive} {
		if r.Contains(1, "/a", w) {
			t.Errorf("Contains(1, /a, %v): true for session 2's or a neighbour's watch", w)
		}
		if r.Remove(1, "/a", w) {
			t.Errorf("Remove(1, /a, %v): true for session 2's or a neighbour's watch", w)
		}
		if r.Contains(3, "/zzz", w) || r.Remove(3, "/zzz", w) {
			t.Errorf("unknown session and path matched %v", w)
		}
	}
	sameDump(t, "untouched", dump(r), []string{"1 / r", "1 /a/b dcpr", "2 /a dcpr"})
}

func TestRemoveRecursiveStopsDescendants(t *testing.T) {
	r := New()
	register(t, r, reg{1, "/a", "r"})
	if !r.Remove(1, "/a", vocab.WatcherPersistentRecursive) {
		t.Fatal("Remove = false")
	}
	if got := r.Trigger(fsm.Trigger{Path: "/a/b", Type: created, Zxid: 1}); got != nil {
		t.Errorf("removed recursive watch still fires: %v", got)
	}
	checkInvariants(t, r)
}

func TestRemoveSession(t *testing.T) {
	r := New()
	register(t, r,
		reg{1, "/a", "dcpr"}, reg{1, "/b", "d"}, reg{1, "/", "r"},
		reg{2, "/a", "d"}, reg{2, "/c", "c"},
	)
	r.RemoveSession(1)
	sameDump(t, "after RemoveSession(1)", dump(r), []string{"2 /a d", "2 /c c"})
	checkInvariants(t, r)
	if got := r.Trigger(fsm.Trigger{Path: "/a", Type: changed, Zxid: 3}); !slices.Equal(got, []Event{ev(2, "/a", changed, 3)}) {
		t.Errorf("after RemoveSession: %v", got)
	}
	if got := r.Trigger(fsm.Trigger{Path: "/b/x", Type: created, Zxid: 4}); got != nil {
		t.Errorf("removed session's recursive watch fired: %v", got)
	}
	r.RemoveSession(1) // again: nothing to do
	r.RemoveSession(2)
	if c, p, n := r.Stats(); c != 0 || p != 0 || n != 0 || r.Len() != 0 {
		t.Errorf("after removing all: Stats %d %d %d, Len %d", c, p, n, r.Len())
	}
	checkInvariants(t, r)
}

func TestIntrospection(t *testing.T) {
	r := New()
	if c, p, n := r.Stats(); c != 0 || p != 0 || n != 0 {
		t.Errorf("empty Stats = %d %d %d", c, p, n)
	}
	register(t, r,
		reg{9, "/z", "d"}, reg{9, "/a", "dc"}, reg{9, "/", "r"},
		reg{3, "/a", "p"}, reg{3, "/m", "c"},
		reg{5, "/a", "d"},
	)
	c, p, n := r.Stats()
	if c != 3 || p != 4 || n != 6 {
		t.Errorf("Stats = %d connections %d paths %d total, want 3 4 6", c, p, n)
	}
	if got := r.Len(); got != 7 {
		t.Errorf("Len = %d, want 7", got)
	}
	wantS := map[int64][]string{9: {"/", "/a", "/z"}, 3: {"/a", "/m"}, 5: {"/a"}}
	if got := r.BySession(); !maps.EqualFunc(got, wantS, slices.Equal) {
		t.Errorf("BySession = %v, want %v", got, wantS)
	}
	wantP := map[string][]int64{"/": {9}, "/a": {3, 5, 9}, "/m": {3}, "/z": {9}}
	if got := r.ByPath(); !maps.EqualFunc(got, wantP, slices.Equal) {
		t.Errorf("ByPath = %v, want %v", got, wantP)
	}
	// Firing /a's one-shots leaves session 3's persistent watch there.
	r.Trigger(fsm.Trigger{Path: "/a", Type: deleted, Zxid: 1})
	if c, p, n := r.Stats(); c != 2 || p != 4 || n != 4 {
		t.Errorf("after delete: Stats = %d %d %d, want 2 4 4", c, p, n)
	}
	if got := r.Len(); got != 4 {
		t.Errorf("after delete: Len = %d, want 4", got)
	}
	checkInvariants(t, r)
}

func TestWatcherType(t *testing.T) {
	for w, name := range map[vocab.WatcherType]string{
		vocab.WatcherChildren: "Children", vocab.WatcherData: "Data", vocab.WatcherAny: "Any", vocab.WatcherPersistent: "Persistent",
		vocab.WatcherPersistentRecursive: "PersistentRecursive", 0: "WatcherType(0)", 6: "WatcherType(6)",
	} {
		if w.String() != name {
			t.Errorf("%d.String() = %q, want %q", int32(w), w.String(), name)
		}
		if want := w >= 1 && w <= 5; w.Valid() != want {
			t.Errorf("%v.Valid() = %v", w, !want)
		}
	}
	// ZooKeeper's numbers are wire values.
	if vocab.WatcherChildren != 1 || vocab.WatcherData != 2 || vocab.WatcherAny != 3 || vocab.WatcherPersistent != 4 || vocab.WatcherPersistentRecursive != 5 {
		t.Error("WatcherType numbers differ from ZooKeeper's")
	}
	if vocab.AddWatchPersistent != 0 || vocab.AddWatchPersistentRecursive != 1 {
		t.Error("AddWatchMode numbers differ from ZooKeeper's")
	}
}

// The session index may list fired watches, but only up to about twice what
// the session held at its last sweep, and they never show.
func TestSessionIndexStaysBounded(t *testing.T) {
	r := New()
	r.AddChild(1, "/keep")
	for i := range 1000 {
		p := fmt.Sprintf("/tmp/n%d", i)
		r.AddData(1, p)
		if got := r.Trigger(fsm.Trigger{Path: p, Type: deleted, Zxid: int64(i + 1)}); len(got) != 1 {
			t.Fatalf("%s: %v", p, got)
		}
		if i%97 == 0 {
			checkInvariants(t, r)
		}
	}
	r.mu.Lock()
	listed := len(r.sessions[1].ids)
	r.mu.Unlock()
	if listed > 2+8 {
		t.Errorf("session 1 lists %d paths for 1 watch", listed)
	}
	if got := r.BySession(); !maps.EqualFunc(got, map[int64][]string{1: {"/keep"}}, slices.Equal) {
		t.Errorf("BySession = %v", got)
	}
	if c, p, n := r.Stats(); c != 1 || p != 1 || n != 1 {
		t.Errorf("Stats = %d %d %d, want 1 1 1", c, p, n)
	}
	r.Remove(1, "/keep", vocab.WatcherChildren)
	if c, _, _ := r.Stats(); c != 0 {
		t.Errorf("Stats counts a session with no watch left")
	}
	r.mu.Lock()
	_, indexed := r.sessions[1]
	r.mu.Unlock()
	if indexed {
		t.Errorf("Stats left a session with no watch in the index")
	}
	checkInvariants(t, r)
}
