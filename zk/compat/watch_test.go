package compat

import (
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
)

// Data watches (getData) are one-shot: two changes, one event.
func TestWatchDataOneShot(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	c.create("/w", "0", 0)
	_, _, ch, err := c.GetW("/w")
	must(t, "getW", err)
	m := c.mark()
	must(t, "set", errOf(c.Set("/w", []byte("1"), -1)))
	must(t, "set", errOf(c.Set("/w", []byte("2"), -1)))
	if ev := waitEvent(t, "data watch", ch); ev.Type != zk.EventNodeDataChanged || ev.Path != "/w" {
		t.Errorf("event %+v", ev)
	}
	c.barrier()
	if evs := c.nodeEventsSince(m, "/w"); !slices.Equal(evs, []zk.EventType{zk.EventNodeDataChanged}) {
		t.Errorf("events on the wire: %v, want one NodeDataChanged", evs)
	}
	// Re-armed, it fires for a delete with NodeDeleted.
	_, _, ch, err = c.GetW("/w")
	must(t, "getW", err)
	must(t, "delete", c.Delete("/w", -1))
	if ev := waitEvent(t, "data watch on delete", ch); ev.Type != zk.EventNodeDeleted || ev.Path != "/w" {
		t.Errorf("event %+v", ev)
	}
}

// exists watches a missing node for its creation and an existing one for
// changes and deletion.
func TestWatchExists(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	writer := connect(t, "writer", cl.Addrs(), clientOpts{})

	ok, st, ch, err := c.ExistsW("/x")
	if err != nil || ok || *st != (zk.Stat{}) {
		t.Fatalf("existsW on a missing node: %v %+v %v", ok, st, err)
	}
	writer.create("/x", "", 0)
	if ev := waitEvent(t, "exists watch on create", ch); ev.Type != zk.EventNodeCreated || ev.Path != "/x" {
		t.Errorf("event %+v", ev)
	}

	ok, _, ch, err = c.ExistsW("/x")
	if err != nil || !ok {
		t.Fatalf("existsW: %v %v", ok, err)
	}
	must(t, "set", errOf(writer.Set("/x", []byte("d"), -1)))
	if ev := waitEvent(t, "exists watch on set", ch); ev.Type != zk.EventNodeDataChanged || ev.Path != "/x" {
		t.Errorf("event %+v", ev)
	}

	_, _, ch, err = c.ExistsW("/x")
	must(t, "existsW", err)
	must(t, "delete", writer.Delete("/x", -1))
	if ev := waitEvent(t, "exists watch on delete", ch); ev.Type != zk.EventNodeDeleted || ev.Path != "/x" {
		t.Errorf("event %+v", ev)
	}

	// An exists watch on a missing node that stays missing, and one on a
	// node whose child changes, do not fire.
	_, _, quiet, err := c.ExistsW("/never")
	must(t, "existsW", err)
	writer.create("/p", "", 0)
	_, _, quiet2, err := c.ExistsW("/p")
	must(t, "existsW", err)
	writer.create("/p/kid", "", 0)
	writer.barrier()
	c.barrier()
	noEvent(t, "exists watch on a missing node", quiet)
	noEvent(t, "exists watch on a node whose child was created", quiet2)
}

// Child watches fire NodeChildrenChanged for creates and deletes of
// children, not for data changes, and NodeDeleted when the node goes.
func TestWatchChildren(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	writer := connect(t, "writer", cl.Addrs(), clientOpts{})
	c.create("/k", "", 0)

	kids, _, ch, err := c.ChildrenW("/k")
	if err != nil || len(kids) != 0 {
		t.Fatalf("childrenW: %v %v", kids, err)
	}
	writer.create("/k/a", "", 0)
	if ev := waitEvent(t, "child watch on create", ch); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/k" {
		t.Errorf("event %+v", ev)
	}

	_, _, ch, err = c.ChildrenW("/k")
	must(t, "childrenW", err)
	// Data changes of the node and of its children, and grandchildren, do
	// not fire it.
	must(t, "set parent", errOf(writer.Set("/k", []byte("x"), -1)))
	must(t, "set child", errOf(writer.Set("/k/a", []byte("x"), -1)))
	writer.create("/k/a/grandchild", "", 0)
	writer.barrier()
	c.barrier()
	noEvent(t, "child watch after data changes", ch)
	must(t, "delete grandchild", writer.Delete("/k/a/grandchild", -1))
	must(t, "delete child", writer.Delete("/k/a", -1))
	if ev := waitEvent(t, "child watch on delete", ch); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/k" {
		t.Errorf("event %+v", ev)
	}

	_, _, ch, err = c.ChildrenW("/k")
	must(t, "childrenW", err)
	must(t, "delete the node", writer.Delete("/k", -1))
	if ev := waitEvent(t, "child watch on the node's delete", ch); ev.Type != zk.EventNodeDeleted || ev.Path != "/k" {
		t.Errorf("event %+v", ev)
	}
	c.barrier()
	if evs := c.nodeEvents("/k"); !slices.Equal(evs, []zk.EventType{zk.EventNodeChildrenChanged, zk.EventNodeChildrenChanged, zk.EventNodeDeleted}) {
		t.Errorf("events for /k: %v", evs)
	}
	// The root's child watch sees /k go.
	_, _, rootW, err := c.ChildrenW("/")
	must(t, "childrenW /", err)
	writer.create("/k2", "", 0)
	if ev := waitEvent(t, "child watch on /", rootW); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/" {
		t.Errorf("event %+v", ev)
	}
}

// A delete tells every kind of watcher, each session once: ZooKeeper sends
// one NodeDeleted per session even when it set data, exists and child
// watches on the node, and go-zookeeper hands it to each.
func TestWatchDeleteNotifiesAll(t *testing.T) {
	cl := newCluster(t, 1)
	data := connect(t, "data", cl.Addrs(), clientOpts{})
	child := connect(t, "child", cl.Addrs(), clientOpts{})
	all := connect(t, "all", cl.Addrs(), clientOpts{})
	data.create("/d", "", 0)

	_, _, dw, err := data.GetW("/d")
	must(t, "getW", err)
	_, _, cw, err := child.ChildrenW("/d")
	must(t, "childrenW", err)
	_, _, a1, err := all.GetW("/d")
	must(t, "getW", err)
	_, _, a2, err := all.ExistsW("/d")
	must(t, "existsW", err)
	_, _, a3, err := all.ChildrenW("/d")
	must(t, "childrenW", err)

	must(t, "delete", data.Delete("/d", -1))
	for name, ch := range map[string]<-chan zk.Event{"getW": dw, "childrenW": cw, "all getW": a1, "all existsW": a2, "all childrenW": a3} {
		if ev := waitEvent(t, name, ch); ev.Type != zk.EventNodeDeleted || ev.Path != "/d" {
			t.Errorf("%s: event %+v", name, ev)
		}
	}
	for _, c := range []*client{data, child, all} {
		c.barrier()
		if evs := c.nodeEvents("/d"); !slices.Equal(evs, []zk.EventType{zk.EventNodeDeleted}) {
			t.Errorf("%s: events on the wire %v, want one NodeDeleted", c.name, evs)
		}
	}

	// Data and exists watches of one session on one node: one event for a
	// change, delivered to both.
	data.create("/d2", "", 0)
	_, _, g, err := all.GetW("/d2")
	must(t, "getW", err)
	_, _, e, err := all.ExistsW("/d2")
	must(t, "existsW", err)
	must(t, "set", errOf(data.Set("/d2", []byte("x"), -1)))
	waitEvent(t, "getW", g)
	waitEvent(t, "existsW", e)
	all.barrier()
	if evs := all.nodeEvents("/d2"); !slices.Equal(evs, []zk.EventType{zk.EventNodeDataChanged}) {
		t.Errorf("events on the wire %v, want one NodeDataChanged", evs)
	}
}

// Failed writes fire nothing; a watch event reaches the client before a
// read of the change it announces.
func TestWatchFailedWritesAndOrdering(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	writer := connect(t, "writer", cl.Addrs(), clientOpts{})
	c.create("/f", "0", 0)
	c.create("/f/kid", "", 0)
	_, _, dw, err := c.GetW("/f")
	must(t, "getW", err)
	_, _, cw, err := c.ChildrenW("/f")
	must(t, "childrenW", err)
	_, err = writer.Set("/f", nil, 42)
	wantErr(t, "set with a bad version", err, zk.ErrBadVersion)
	_, err = writer.Create("/f/kid", nil, 0, zk.WorldACL(zk.PermAll))
	wantErr(t, "create existing", err, zk.ErrNodeExists)
	wantErr(t, "delete a parent", writer.Delete("/f", -1), zk.ErrNotEmpty)
	wantErr(t, "delete with a bad version", writer.Delete("/f/kid", 42), zk.ErrBadVersion)
	_, err = writer.Multi(&zk.SetDataRequest{Path: "/f", Data: []byte("m"), Version: -1}, &zk.DeleteRequest{Path: "/f/none", Version: -1})
	wantErr(t, "failed multi", err, zk.ErrNoNode)
	writer.barrier()
	c.barrier()
	noEvent(t, "data watch after failed writes", dw)
	noEvent(t, "child watch after failed writes", cw)

	// The writer changes /f; c polls it: the first read that shows the new
	// value comes after the event.
	must(t, "set", errOf(writer.Set("/f", []byte("new"), -1)))
	for i := 0; ; i++ {
		d, _, err := c.Get("/f")
		must(t, "get", err)
		if string(d) == "new" {
			break
		}
		if i > 1000 {
			t.Fatal("never saw the new value")
		}
	}
	if evs := c.nodeEvents("/f"); !slices.Equal(evs, []zk.EventType{zk.EventNodeDataChanged}) {
		t.Errorf("read the new value before its event: events %v", evs)
	}
}

func errOf(_ any, err error) error { return err }

// Events reach a client in the order of the changes that fired them, across
// nodes and watch kinds.
func TestWatchEventOrder(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	writer := connect(t, "writer", cl.Addrs(), clientOpts{})
	paths := []string{"/o1", "/o2", "/o3", "/o4", "/o5"}
	for _, p := range paths {
		c.create(p, "", 0)
		_, _, _, err := c.GetW(p)
		must(t, "getW", err)
	}
	_, _, _, err := c.ChildrenW("/o2")
	must(t, "childrenW", err)
	_, _, _, err = c.ExistsW("/o6")
	must(t, "existsW", err)
	m := c.mark()
	must(t, "set", errOf(writer.Set("/o3", nil, -1)))
	writer.create("/o6", "", 0)
	must(t, "set", errOf(writer.Set("/o1", nil, -1)))
	writer.create("/o2/kid", "", 0)
	must(t, "delete", writer.Delete("/o5", -1))
	must(t, "set", errOf(writer.Set("/o2", nil, -1)))
	must(t, "set", errOf(writer.Set("/o4", nil, -1)))
	writer.barrier()
	c.barrier()
	var got []string
	for _, e := range c.rec.since(m) {
		if e.Type != zk.EventSession {
			got = append(got, e.Type.String()+" "+e.Path)
		}
	}
	want := []string{"EventNodeDataChanged /o3", "EventNodeCreated /o6", "EventNodeDataChanged /o1",
		"EventNodeChildrenChanged /o2", "EventNodeDeleted /o5", "EventNodeDataChanged /o2", "EventNodeDataChanged /o4"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}
