package watch

import (
	"errors"
	"fmt"
	"testing"

	"coord/fsm"
	"coord/vocab"
)

// A session holds at most maxPerSession watches, each kind on a path once;
// watches that fire, are removed or go with their session make room again,
// and other sessions are not affected.
func TestLimitPerSession(t *testing.T) {
	r := NewLimited(3)
	mustAdd := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrTooManyWatches) {
			t.Fatalf("%s: %v, want ErrTooManyWatches", what, err)
		}
	}
	mustAdd("data /a", r.AddData(1, "/a"))
	mustAdd("child /a", r.AddChild(1, "/a"))
	mustAdd("persistent /b", r.AddWatch(1, "/b", vocab.AddWatchPersistent))
	refused("data /c", r.AddData(1, "/c"))
	refused("recursive /b", r.AddWatch(1, "/b", vocab.AddWatchPersistentRecursive))
	refused("asOf child /c", func() error { _, err := r.AddChildAsOf(1, "/c", 0); return err }())
	// Held already: not a new watch.
	mustAdd("data /a again", r.AddData(1, "/a"))
	mustAdd("persistent /b again", r.AddWatch(1, "/b", vocab.AddWatchPersistent))
	mustAdd("another session", r.AddData(2, "/c"))
	if r.Contains(1, "/c", vocab.WatcherAny) || r.Len() != 4 {
		t.Fatalf("after refusals: /c watched %v, Len %d; want false, 4", r.Contains(1, "/c", vocab.WatcherAny), r.Len())
	}

	// A fired one-shot watch frees its place: the whole path at once (the
	// fast path) ...
	r.Trigger(fsm.Trigger{Path: "/a", Type: vocab.EventNodeDataChanged, Zxid: 1})
	mustAdd("data /c after /a fired", r.AddData(1, "/c"))
	refused("data /d", r.AddData(1, "/d"))
	// ... or one kind among survivors (the persistent watch stays).
	mustAdd("data /b", func() error { r.Remove(1, "/c", vocab.WatcherData); return r.AddData(1, "/b") }())
	r.Trigger(fsm.Trigger{Path: "/b", Type: vocab.EventNodeDataChanged, Zxid: 2})
	mustAdd("data /d after /b's one-shot fired", r.AddData(1, "/d"))
	refused("data /e", r.AddData(1, "/e"))
	r.RemoveSession(1)
	for i := range 3 {
		mustAdd("after RemoveSession", r.AddData(1, fmt.Sprintf("/n%d", i)))
	}
	refused("fourth after RemoveSession", r.AddData(1, "/n3"))
}

// Reattach registers the client's watches in its order while they fit and
// reports the rest; the events it synthesizes are returned either way.
func TestReattachLimit(t *testing.T) {
	g := newRig(t)
	g.r = NewLimited(2)
	g.apply(create("/a"))
	_, z := g.apply(create("/b"))
	g.apply(setData("/a"))
	events, err := g.r.Reattach(g.f.View(), 7, z, WatchSet{
		DataWatches:       []string{"/a", "/b"},       // /a changed: an event, not a watch
		ExistWatches:      []string{"/missing"},       // a watch
		ChildWatches:      []string{"/b"},             // does not fit
		PersistentWatches: []string{"/p", "/missing"}, // neither fits
	})
	if !errors.Is(err, ErrTooManyWatches) {
		t.Fatalf("Reattach: %v, want ErrTooManyWatches", err)
	}
	if len(events) != 1 || events[0].Path != "/a" || events[0].Type != vocab.EventNodeDataChanged {
		t.Fatalf("events %+v, want NodeDataChanged /a", events)
	}
	if !g.r.Contains(7, "/b", vocab.WatcherData) || !g.r.Contains(7, "/missing", vocab.WatcherData) || g.r.Contains(7, "/b", vocab.WatcherChildren) ||
		g.r.Contains(7, "/p", vocab.WatcherPersistent) || g.r.Contains(7, "/missing", vocab.WatcherPersistent) || g.r.Len() != 2 {
		t.Fatalf("registered %v, want data watches on /b and /missing only", g.r.BySession())
	}
}
