package compat

import (
	"bytes"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Create, read, update and delete with versions, and the Stat fields after
// each, compared by their relations (zxids and times differ between coord
// and ZooKeeper; how they move does not).
func TestCRUDVersionsAndStat(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	before := time.Now().Add(-time.Minute).UnixMilli()

	if p := c.create("/crud", "v0", 0); p != "/crud" {
		t.Fatalf("create returned %q", p)
	}
	st0 := c.stat("/crud")
	if st0.Czxid <= 0 || st0.Czxid != st0.Mzxid || st0.Czxid != st0.Pzxid {
		t.Errorf("after create: czxid %d, mzxid %d, pzxid %d: want all equal and > 0", st0.Czxid, st0.Mzxid, st0.Pzxid)
	}
	if st0.Version != 0 || st0.Cversion != 0 || st0.Aversion != 0 || st0.EphemeralOwner != 0 || st0.NumChildren != 0 || st0.DataLength != 2 {
		t.Errorf("after create: %+v", st0)
	}
	if st0.Ctime != st0.Mtime || st0.Ctime < before || st0.Ctime > time.Now().Add(time.Minute).UnixMilli() {
		t.Errorf("after create: ctime %d, mtime %d: want equal and about now", st0.Ctime, st0.Mtime)
	}
	data, gst, err := c.Get("/crud")
	must(t, "get", err)
	if string(data) != "v0" || *gst != *st0 {
		t.Errorf("get: %q %+v, want v0 %+v", data, gst, st0)
	}

	// setData with the current version, a stale one, and -1 (any).
	st1, err := c.Set("/crud", []byte("v1"), 0)
	must(t, "set v0", err)
	if st1.Version != 1 || st1.Mzxid <= st0.Mzxid || st1.Czxid != st0.Czxid || st1.Pzxid != st0.Pzxid ||
		st1.Mtime < st1.Ctime || st1.Cversion != 0 || st1.Aversion != 0 || st1.DataLength != 2 {
		t.Errorf("after set: %+v (before %+v)", st1, st0)
	}
	_, err = c.Set("/crud", []byte("stale"), 0)
	wantErr(t, "set with a stale version", err, zk.ErrBadVersion)
	if data, st, _ := c.Get("/crud"); string(data) != "v1" || *st != *st1 {
		t.Errorf("a failed set changed the node: %q %+v", data, st)
	}
	st2, err := c.Set("/crud", []byte("v22"), -1)
	must(t, "set -1", err)
	if st2.Version != 2 || st2.Mzxid <= st1.Mzxid || st2.DataLength != 3 {
		t.Errorf("after set -1: %+v", st2)
	}

	// Children move cversion, pzxid and numChildren of the parent only.
	c.create("/crud/a", "", 0)
	a := c.stat("/crud/a")
	p1 := c.stat("/crud")
	if p1.Cversion != 1 || p1.NumChildren != 1 || p1.Pzxid != a.Czxid || p1.Mzxid != st2.Mzxid || p1.Version != 2 {
		t.Errorf("parent after a create: %+v (child czxid %d)", p1, a.Czxid)
	}
	c.create("/crud/b", "", 0)
	b := c.stat("/crud/b")
	p2 := c.stat("/crud")
	if p2.Cversion != 2 || p2.NumChildren != 2 || p2.Pzxid != b.Czxid || b.Czxid <= a.Czxid {
		t.Errorf("parent after two creates: %+v (children czxid %d, %d)", p2, a.Czxid, b.Czxid)
	}
	kids, cst, err := c.Children("/crud")
	must(t, "children", err)
	slices.Sort(kids)
	if !slices.Equal(kids, []string{"a", "b"}) || *cst != *p2 {
		t.Errorf("children: %v %+v", kids, cst)
	}
	// Setting a child's data does not touch the parent.
	if _, err := c.Set("/crud/a", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if p := c.stat("/crud"); *p != *p2 {
		t.Errorf("a child's setData changed the parent: %+v, was %+v", p, p2)
	}

	// delete with a stale version, then the right one.
	wantErr(t, "delete with a stale version", c.Delete("/crud/a", 0), zk.ErrBadVersion)
	must(t, "delete", c.Delete("/crud/a", 1))
	p3 := c.stat("/crud")
	if p3.NumChildren != 1 || p3.Pzxid <= p2.Pzxid || p3.Mzxid != p2.Mzxid || p3.Version != p2.Version {
		t.Errorf("parent after a delete: %+v (before %+v)", p3, p2)
	}
	// ZooKeeper reports cversion = 2*creates - numChildren (DataNode.copyStat),
	// so a delete shows as a child change too.
	if p3.Cversion != 3 {
		t.Errorf("parent's cversion after 2 creates and 1 delete: %d, want 3", p3.Cversion)
	}
	if ok, _, err := c.Exists("/crud/a"); ok || err != nil {
		t.Errorf("exists after delete: %v %v", ok, err)
	}
	wantErr(t, "delete a node with children", c.Delete("/crud", -1), zk.ErrNotEmpty)
	must(t, "delete b", c.Delete("/crud/b", -1))
	must(t, "delete parent", c.Delete("/crud", 2))
	if ok, st, err := c.Exists("/crud"); ok || err != nil || *st != (zk.Stat{}) {
		t.Errorf("exists after delete: %v %+v %v", ok, st, err)
	}

	// Null and empty data.
	if _, err := c.Create("/null", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if data, st, err := c.Get("/null"); err != nil || len(data) != 0 || st.DataLength != 0 {
		t.Errorf("get of null data: %q %+v %v", data, st, err)
	}
	big := bytes.Repeat([]byte("z"), 100<<10)
	if _, err := c.Set("/null", big, -1); err != nil {
		t.Fatal(err)
	}
	if data, st, err := c.Get("/null"); err != nil || !bytes.Equal(data, big) || st.DataLength != int32(len(big)) {
		t.Errorf("get of 100 KiB: %d bytes, %+v, %v", len(data), st, err)
	}
}

// Every error a client can get from the basic operations.
func TestErrorCodes(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	acl := zk.WorldACL(zk.PermAll)
	c.create("/e", "", 0)
	c.create("/e/kid", "", 0)

	// NoNode on every op that names a missing node, and on create under a
	// missing parent.
	_, err := c.Create("/missing/x", nil, 0, acl)
	wantErr(t, "create under a missing parent", err, zk.ErrNoNode)
	_, _, err = c.Get("/missing")
	wantErr(t, "get", err, zk.ErrNoNode)
	_, err = c.Set("/missing", nil, -1)
	wantErr(t, "set", err, zk.ErrNoNode)
	wantErr(t, "delete", c.Delete("/missing", -1), zk.ErrNoNode)
	_, _, err = c.Children("/missing")
	wantErr(t, "children", err, zk.ErrNoNode)
	_, _, err = c.GetACL("/missing")
	wantErr(t, "getACL", err, zk.ErrNoNode)
	_, err = c.SetACL("/missing", acl, -1)
	wantErr(t, "setACL", err, zk.ErrNoNode)
	_, _, _, err = c.GetW("/missing")
	wantErr(t, "getW", err, zk.ErrNoNode)
	_, _, _, err = c.ChildrenW("/missing")
	wantErr(t, "childrenW", err, zk.ErrNoNode)

	// NodeExists, also for the root and for /zookeeper.
	_, err = c.Create("/e", nil, 0, acl)
	wantErr(t, "create existing", err, zk.ErrNodeExists)
	_, err = c.Create("/zookeeper", nil, 0, acl)
	wantErr(t, "create /zookeeper", err, zk.ErrNodeExists)

	// BadVersion on set, delete and setACL.
	_, err = c.Set("/e", nil, 7)
	wantErr(t, "set", err, zk.ErrBadVersion)
	wantErr(t, "delete", c.Delete("/e/kid", 7), zk.ErrBadVersion)
	_, err = c.SetACL("/e", acl, 7)
	wantErr(t, "setACL", err, zk.ErrBadVersion)

	// NotEmpty.
	wantErr(t, "delete a parent", c.Delete("/e", -1), zk.ErrNotEmpty)

	// NoChildrenForEphemerals, also for a sequential child.
	c.create("/e/eph", "", zk.FlagEphemeral)
	_, err = c.Create("/e/eph/kid", nil, 0, acl)
	wantErr(t, "child of an ephemeral", err, zk.ErrNoChildrenForEphemerals)
	_, err = c.Create("/e/eph/kid-", nil, zk.FlagSequence, acl)
	wantErr(t, "sequential child of an ephemeral", err, zk.ErrNoChildrenForEphemerals)

	// InvalidACL: an empty list, an unknown id for world, the auth scheme
	// with no authenticated identity, a malformed digest id and a bad ip.
	for _, bad := range [][]zk.ACL{
		{},
		{{Perms: zk.PermAll, Scheme: "world", ID: "bob"}},
		zk.AuthACL(zk.PermAll),
		{{Perms: zk.PermAll, Scheme: "digest", ID: "nocolon"}},
		{{Perms: zk.PermAll, Scheme: "ip", ID: "not-an-ip"}},
		{{Perms: zk.PermAll, Scheme: "nosuchscheme", ID: "x"}},
	} {
		_, err := c.Create("/bad-acl", nil, 0, bad)
		wantErr(t, "create with ACL "+aclString(bad), err, zk.ErrInvalidACL)
		_, err = c.SetACL("/e", bad, -1)
		wantErr(t, "setACL "+aclString(bad), err, zk.ErrInvalidACL)
	}
	if ok, _, _ := c.Exists("/bad-acl"); ok {
		t.Error("a create with an invalid ACL left a node")
	}

	// BadArguments: TTLs out of range (go-zookeeper checks paths itself,
	// so bad paths are in the raw and multi tests).
	_, err = c.CreateTTL("/ttl", nil, zk.FlagTTL, acl, 0)
	wantErr(t, "ttl 0", err, zk.ErrBadArguments)
	_, err = c.CreateTTL("/ttl", nil, zk.FlagTTL, acl, -time.Second)
	wantErr(t, "negative ttl", err, zk.ErrBadArguments)
	_, err = c.CreateTTL("/ttl", nil, zk.FlagTTL, acl, 1<<40*time.Millisecond)
	wantErr(t, "ttl beyond 2^40-1 ms", err, zk.ErrBadArguments)
	if ok, _, _ := c.Exists("/ttl"); ok {
		t.Error("a refused ttl create left a node")
	}

	// The tree is as it was.
	kids, _, err := c.Children("/e")
	must(t, "children", err)
	slices.Sort(kids)
	if !slices.Equal(kids, []string{"eph", "kid"}) {
		t.Errorf("children of /e after the errors: %v", kids)
	}
}

func aclString(acl []zk.ACL) string {
	var b bytes.Buffer
	b.WriteString("[")
	for i, a := range acl {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(a.Scheme + ":" + a.ID)
	}
	b.WriteString("]")
	return b.String()
}

// The largest request is jute.maxbuffer (1 MiB - 1 bytes of frame): a create
// that just fits is stored and read back; one byte more and the server drops
// the connection (the session survives and the node is not created).
func TestFrameLimit(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	// Frame of a create of "/big" with open ACL: 8 (header) + 8 (path) +
	// 4+n (data) + 27 (ACL) + 4 (flags) = n + 51 bytes.
	const fits = 0xfffff - 51
	big := bytes.Repeat([]byte("b"), fits)
	if _, err := c.Create("/big", big, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create with %d bytes: %v", fits, err)
	}
	if data, st, err := c.Get("/big"); err != nil || !bytes.Equal(data, big) || st.DataLength != fits {
		t.Errorf("get of %d bytes: %d bytes, %v", fits, len(data), err)
	}
	id := c.SessionID()
	m := c.mark()
	_, err := c.Create("/big2", append(big, 'b'), 0, zk.WorldACL(zk.PermAll))
	// The client sees its connection go: closed under it, or a write cut
	// short while it was still sending the megabyte.
	if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("create one byte over the frame limit: %v, want the connection dropped", err)
	}
	c.waitStateSince(m, zk.StateHasSession)
	if c.SessionID() != id {
		t.Errorf("session changed: %x, was %x", c.SessionID(), id)
	}
	if ok, _, err := c.Exists("/big2"); ok || err != nil {
		t.Errorf("the refused create left /big2: %v %v", ok, err)
	}
}
