package compat

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A watch event reaches only a session that may read the node at the time
// of the change (ZooKeeper since the fix for CVE-2024-23944; Debian's 3.8.0
// carries it): the node's ACL for its own events, the parent's for
// NodeChildrenChanged. exists needs no permission, so it can watch a node
// its session cannot read; such a watch fires silently, and is spent.
func TestWatchEventsOnlyToReaders(t *testing.T) {
	cl := newCluster(t, 1)
	owner := connect(t, "owner", cl.Addrs(), clientOpts{})
	must(t, "auth owner", owner.AddAuth("digest", []byte("owner:pw")))
	mine := zk.DigestACL(zk.PermAll, "owner", "pw")
	readable := append(zk.WorldACL(zk.PermRead), mine...)
	c := connect(t, "c", cl.Addrs(), clientOpts{}) // no identity but its address

	if _, err := owner.Create("/secret", []byte("a"), 0, mine); err != nil {
		t.Fatal(err)
	}
	ok, _, changed, err := c.ExistsW("/secret")
	if err != nil || !ok {
		t.Fatalf("existsW /secret without READ: %v %v (exists needs no permission)", ok, err)
	}
	must(t, "set", errOf(owner.Set("/secret", []byte("b"), -1)))
	owner.barrier()
	c.barrier()
	noEvent(t, "data change of a node the watcher may not read", changed)

	// The watch was spent by the change it was not told of: once the
	// session may read the node, a second change is not announced either.
	must(t, "setACL", errOf(owner.SetACL("/secret", readable, -1)))
	must(t, "set", errOf(owner.Set("/secret", []byte("c"), -1)))
	owner.barrier()
	c.barrier()
	noEvent(t, "a change after the unannounced one (the watch was spent)", changed)

	// With READ, the same watch announces the change.
	_, _, changed, err = c.ExistsW("/secret")
	must(t, "existsW", err)
	must(t, "set", errOf(owner.Set("/secret", []byte("d"), -1)))
	if ev := waitEvent(t, "data change of a readable node", changed); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("event %+v, want NodeDataChanged", ev)
	}

	// Creation and deletion are judged by the node's ACL.
	_, _, created, err := c.ExistsW("/born-secret")
	must(t, "existsW", err)
	if _, err := owner.Create("/born-secret", nil, 0, mine); err != nil {
		t.Fatal(err)
	}
	must(t, "setACL", errOf(owner.SetACL("/secret", mine, -1)))
	_, _, deleted, err := c.ExistsW("/secret")
	must(t, "existsW", err)
	must(t, "delete", owner.Delete("/secret", -1))
	owner.barrier()
	c.barrier()
	noEvent(t, "creation of a node the watcher may not read", created)
	noEvent(t, "deletion of a node the watcher may not read", deleted)

	// A child change is judged by the parent's ACL at the time: a session
	// that could list the children when it set the watch but has lost
	// READ on the parent is not told.
	if _, err := owner.Create("/dir", nil, 0, readable); err != nil {
		t.Fatal(err)
	}
	_, _, kids, err := c.ChildrenW("/dir")
	must(t, "childrenW", err)
	must(t, "setACL", errOf(owner.SetACL("/dir", mine, -1)))
	if _, err := owner.Create("/dir/kid", nil, 0, readable); err != nil {
		t.Fatal(err)
	}
	owner.barrier()
	c.barrier()
	noEvent(t, "child change under a parent the watcher may no longer read", kids)

	// A readable child under an unreadable parent: the child's own events
	// follow the child's ACL.
	_, _, kidData, err := c.ExistsW("/dir/kid")
	must(t, "existsW", err)
	must(t, "set", errOf(owner.Set("/dir/kid", []byte("x"), -1)))
	if ev := waitEvent(t, "data change of a readable child of an unreadable parent", kidData); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("event %+v, want NodeDataChanged", ev)
	}
}

// A superuser configured by its digest (ZooKeeper's
// zookeeper.DigestAuthenticationProvider.superDigest, coord's
// -super-digest) passes every ACL check once it authenticates with its
// password, and is told of changes to nodes no one else may read; the
// same user with another password is nobody special. Real processes of both.
func TestSuperDigest(t *testing.T) {
	super := zk.DigestACL(zk.PermAll, "super", "secret")[0].ID
	cl := newProcClusterOpts(t, 1, procOpts{
		coordArgs: []string{"-super-digest", super},
		jvmProps:  []string{"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + super},
	})
	owner := connect(t, "owner", cl.Addrs(), clientOpts{})
	must(t, "auth owner", owner.AddAuth("digest", []byte("owner:pw")))
	mine := zk.DigestACL(zk.PermAll, "owner", "pw")
	if _, err := owner.Create("/locked", []byte("x"), 0, mine); err != nil {
		t.Fatal(err)
	}

	impostor := connect(t, "impostor", cl.Addrs(), clientOpts{})
	must(t, "auth impostor", impostor.AddAuth("digest", []byte("super:guess")))
	_, _, err := impostor.Get("/locked")
	wantErr(t, "getData with the superuser's name and another password", err, zk.ErrNoAuth)

	root := connect(t, "root", cl.Addrs(), clientOpts{})
	must(t, "auth super", root.AddAuth("digest", []byte("super:secret")))
	if data, _, err := root.Get("/locked"); err != nil || string(data) != "x" {
		t.Fatalf("superuser getData: %q %v", data, err)
	}
	_, _, changed, err := root.GetW("/locked")
	must(t, "superuser getW", err)
	must(t, "superuser setData", errOf(root.Set("/locked", []byte("y"), -1)))
	if ev := waitEvent(t, "the superuser's watch on a node only owner may read", changed); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("event %+v", ev)
	}
	if acl, _, err := root.GetACL("/locked"); err != nil || len(acl) != 1 || acl[0] != mine[0] {
		t.Errorf("superuser getACL: %v %v", acl, err)
	}
	if _, err := root.Create("/locked/kid", nil, 0, mine); err != nil {
		t.Errorf("superuser create under /locked: %v", err)
	}
	must(t, "superuser delete", root.Delete("/locked/kid", -1))
	must(t, "superuser setACL", errOf(root.SetACL("/locked", zk.WorldACL(zk.PermRead), -1)))
	if data, _, err := impostor.Get("/locked"); err != nil || string(data) != "y" {
		t.Errorf("after the superuser opened /locked to reading: %q %v", data, err)
	}
}

// The events a re-attaching client's setWatches fires at once, for changes
// made while it was away, are not filtered by ZooKeeper 3.8 (with the
// CVE-2024-23944 fix): the client learns that a node it may not read
// changed. coord does the same, so clients see the same events; see
// docs/security.md.
func TestWatchEventsOnlyToReadersAfterReattach(t *testing.T) {
	cl := newCluster(t, 1)
	owner := connect(t, "owner", cl.Addrs(), clientOpts{})
	must(t, "auth owner", owner.AddAuth("digest", []byte("owner:pw")))
	mine := zk.DigestACL(zk.PermAll, "owner", "pw")
	if _, err := owner.Create("/secret", []byte("a"), 0, mine); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Create("/open", []byte("a"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	d := newDialer(cl.Addr(0))
	c := connect(t, "c", cl.Addrs(), clientOpts{dialer: d, timeout: 4 * time.Second})
	_, _, secret, err := c.ExistsW("/secret")
	must(t, "existsW /secret", err)
	_, _, open, err := c.ExistsW("/open")
	must(t, "existsW /open", err)

	m := c.mark()
	d.holdDials()
	d.freeze()
	must(t, "set /secret", errOf(owner.Set("/secret", []byte("b"), -1)))
	must(t, "set /open", errOf(owner.Set("/open", []byte("b"), -1)))
	c.waitStateSince(m, zk.StateDisconnected)
	d.release()
	c.waitStateSince(m, zk.StateHasSession)
	if ev := waitEvent(t, "a readable node changed while away", open); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("event %+v", ev)
	}
	if ev := waitEvent(t, "an unreadable node changed while away (ZooKeeper tells)", secret); ev.Type != zk.EventNodeDataChanged {
		t.Errorf("event %+v", ev)
	}
}
