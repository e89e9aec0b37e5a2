package client

import (
	"errors"
	"testing"

	"coord/vocab"
)

func TestOneShotWatchesFireOnce(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	other, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/d", []byte("0"), vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}

	// Two GetW on one path: the server holds one watch and sends one event,
	// and both channels get it.
	_, _, w1, err := c.GetW(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	_, _, w2, err := c.GetW(ctx, "/d")
	if err != nil {
		t.Fatal(err)
	}
	ok, _, we, err := c.ExistsW(ctx, "/new")
	if ok || err != nil {
		t.Fatalf("ExistsW on a missing node = %v %v", ok, err)
	}
	_, _, wc, err := c.ChildrenW(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}

	for i := range 2 {
		if _, err := other.Set(ctx, "/d", []byte{byte(i)}, AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range []<-chan Event{w1, w2} {
		ev := recv(t, w)
		if ev.Type != vocab.EventNodeDataChanged || ev.Path != "/d" || ev.State != StateConnected || ev.Zxid == 0 {
			t.Fatalf("data watch: %v", ev)
		}
		closed(t, w) // fired once, though the data changed twice
	}

	if _, err := other.Create(ctx, "/new", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, we); ev.Type != vocab.EventNodeCreated || ev.Path != "/new" {
		t.Fatalf("exists watch: %v", ev)
	}
	closed(t, we)
	if ev := recv(t, wc); ev.Type != vocab.EventNodeChildrenChanged || ev.Path != "/" {
		t.Fatalf("child watch: %v", ev)
	}
	closed(t, wc)
	if c.watches.has("/d", vocab.WatcherAny) || c.watches.has("/", vocab.WatcherAny) || c.watches.has("/new", vocab.WatcherAny) {
		t.Fatal("fired watches still registered")
	}

	// A failed read sets no watch.
	if _, _, w, err := c.GetW(ctx, "/nope"); !errors.Is(err, vocab.NoNode) || w != nil {
		t.Fatalf("GetW on a missing node = %v %v", w, err)
	}
	if c.watches.has("/nope", vocab.WatcherAny) {
		t.Fatal("failed GetW registered a watch")
	}
}

// The server sends a change's event before the response that shows it; the
// client must hand the event over before the call returns.
func TestEventBeforeResponse(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	if _, err := c.Create(ctx, "/d", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		_, _, w, err := c.GetW(ctx, "/d")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Set(ctx, "/d", []byte("x"), AnyVersion); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w:
			if ev.Type != vocab.EventNodeDataChanged {
				t.Fatalf("event %v", ev)
			}
		default:
			t.Fatal("Set returned before the watch event was delivered")
		}
	}
}

func TestPersistentWatches(t *testing.T) {
	f := newFakeServer(t, newFakeCluster())
	c, _ := dial(t, []string{f.addr})
	ctx := ctxT(t)
	for _, p := range []string{"/p", "/r", "/r/x"} {
		if _, err := c.Create(ctx, p, nil, vocab.ModePersistent, nil); err != nil {
			t.Fatal(err)
		}
	}
	wp, err := c.AddWatch(ctx, "/p", false)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := c.AddWatch(ctx, "/r", true)
	if err != nil {
		t.Fatal(err)
	}

	// A persistent watch stays after firing.
	for range 3 {
		if _, err := c.Set(ctx, "/p", nil, AnyVersion); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Create(ctx, "/p/c", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	want := []vocab.EventType{vocab.EventNodeDataChanged, vocab.EventNodeDataChanged, vocab.EventNodeDataChanged, vocab.EventNodeChildrenChanged}
	for i, typ := range want {
		if ev := recv(t, wp); ev.Type != typ || ev.Path != "/p" {
			t.Fatalf("persistent event %d: %v, want %v", i, ev, typ)
		}
	}

	// A recursive one sees descendants, but not child-list changes.
	if _, err := c.Create(ctx, "/r/x/y", nil, vocab.ModePersistent, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/r/x/y", []byte("1"), AnyVersion); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/r/x/y", AnyVersion); err != nil {
		t.Fatal(err)
	}
	for i, want := range []Event{
		{Type: vocab.EventNodeCreated, Path: "/r/x/y"},
		{Type: vocab.EventNodeDataChanged, Path: "/r/x/y"},
		{Type: vocab.EventNodeDeleted, Path: "/r/x/y"},
	} {
		if ev := recv(t, wr); ev.Type != want.Type || ev.Path != want.Path {
			t.Fatalf("recursive event %d: %v, want %v", i, ev, want)
		}
	}
	quiet(t, wr)

	if err := c.RemoveWatches(ctx, "/p", vocab.WatcherPersistent); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, wp); ev.Type != EventNotWatching || ev.Path != "/p" {
		t.Fatalf("after RemoveWatches: %v", ev)
	}
	closed(t, wp)
	if err := c.RemoveWatches(ctx, "/p", vocab.WatcherPersistent); !errors.Is(err, vocab.NoWatcher) {
		t.Fatalf("second RemoveWatches: %v", err)
	}
}
