package compat

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Sequential names come from the parent's cversion as %010d.
func TestSequentialNames(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	c.create("/seq", "", 0)
	c.create("/seq/plain", "", 0)
	if p := c.create("/seq/q-", "", zk.FlagSequence); p != "/seq/q-0000000001" {
		t.Errorf("first sequential after one child: %q", p)
	}
	if p := c.create("/seq/q-", "", zk.FlagSequence); p != "/seq/q-0000000002" {
		t.Errorf("second sequential: %q", p)
	}
	must(t, "delete", c.Delete("/seq/plain", -1))
	// A delete does not advance the counter a sequential name takes.
	if p := c.create("/seq/", "", zk.FlagSequence); p != "/seq/0000000003" {
		t.Errorf("sequential with an empty prefix after a delete: %q", p)
	}
	if p := c.create("/seq/e-", "", zk.FlagEphemeralSequential); p != "/seq/e-0000000004" {
		t.Errorf("ephemeral sequential: %q", p)
	}
	// A failed create does not advance it either.
	_, err := c.Create("/seq/q-0000000001", nil, 0, zk.WorldACL(zk.PermAll))
	wantErr(t, "create an existing sequential name", err, zk.ErrNodeExists)
	if p := c.create("/seq/q-", "", zk.FlagSequence); p != "/seq/q-0000000005" {
		t.Errorf("sequential after a failed create: %q", p)
	}

	// Concurrent sequential creates from several sessions: unique names,
	// the counter's values without gaps.
	c.create("/race", "", 0)
	const sessions, each = 3, 10
	var mu sync.Mutex
	var names []string
	var wg sync.WaitGroup
	for s := 0; s < sessions; s++ {
		cs := connect(t, fmt.Sprintf("s%d", s), cl.Addrs(), clientOpts{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				p, err := cs.Create("/race/n-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				names = append(names, p)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(names)
	for i, n := range names {
		if want := fmt.Sprintf("/race/n-%010d", i); n != want {
			t.Fatalf("sequential names %v: #%d is %s, want %s", names, i, n, want)
		}
	}
	if st := c.stat("/race"); st.NumChildren != sessions*each || st.Cversion != sessions*each {
		t.Errorf("/race after %d creates: %+v", sessions*each, st)
	}
}

// Ephemeral nodes: owned by their session, listed by it, gone with it, and
// their watchers told.
func TestEphemeralNodes(t *testing.T) {
	cl := newCluster(t, 1)
	owner := connect(t, "owner", cl.Addrs(), clientOpts{})
	other := connect(t, "other", cl.Addrs(), clientOpts{})
	owner.create("/eph", "", 0)
	e := owner.create("/eph/e", "data", zk.FlagEphemeral)
	es := owner.create("/eph/es-", "", zk.FlagEphemeralSequential)
	mine := other.create("/eph/other", "", zk.FlagEphemeral)
	if st := other.stat(e); st.EphemeralOwner != owner.SessionID() || st.EphemeralOwner == 0 {
		t.Errorf("ephemeralOwner %x, want the owner's session %x", st.EphemeralOwner, owner.SessionID())
	}
	if st := other.stat(es); st.EphemeralOwner != owner.SessionID() {
		t.Errorf("ephemeral sequential's owner %x, want %x", st.EphemeralOwner, owner.SessionID())
	}
	if st := other.stat("/eph"); st.EphemeralOwner != 0 {
		t.Errorf("persistent node's ephemeralOwner %x", st.EphemeralOwner)
	}
	if !strings.HasPrefix(es, "/eph/es-") || len(es) != len("/eph/es-")+10 {
		t.Errorf("ephemeral sequential name %q", es)
	}
	// Another session may change and delete an ephemeral it does not own
	// (only ACLs guard it).
	if _, err := other.Set(e, []byte("by other"), -1); err != nil {
		t.Errorf("set another session's ephemeral: %v", err)
	}
	tmp := owner.create("/eph/tmp", "", zk.FlagEphemeral)
	must(t, "delete another session's ephemeral", other.Delete(tmp, -1))

	_, _, dataW, err := other.GetW(e)
	must(t, "getW", err)
	_, _, existW, err := other.ExistsW(es)
	must(t, "existsW", err)
	_, _, kidsW, err := other.ChildrenW("/eph")
	must(t, "childrenW", err)

	owner.Close()
	if ev := waitEvent(t, "data watch on a closed session's ephemeral", dataW); ev.Type != zk.EventNodeDeleted || ev.Path != e {
		t.Errorf("event %+v, want NodeDeleted %s", ev, e)
	}
	if ev := waitEvent(t, "exists watch", existW); ev.Type != zk.EventNodeDeleted || ev.Path != es {
		t.Errorf("event %+v, want NodeDeleted %s", ev, es)
	}
	if ev := waitEvent(t, "child watch", kidsW); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/eph" {
		t.Errorf("event %+v, want NodeChildrenChanged /eph", ev)
	}
	kids, _, err := other.Children("/eph")
	must(t, "children", err)
	if !slices.Equal(kids, []string{"other"}) {
		t.Errorf("children after the owner closed: %v, want [other]", kids)
	}
	other.barrier()
	// One NodeChildrenChanged for the parent although two children went (one
	// close, one transaction, one event: the watch is one-shot).
	if evs := other.nodeEvents("/eph"); len(evs) != 1 {
		t.Errorf("events for /eph: %v, want one NodeChildrenChanged", evs)
	}
	if ok, _, _ := other.Exists(mine); !ok {
		t.Error("the other session's ephemeral went too")
	}
}

// Containers vanish once their last child goes; TTL nodes once their ttl
// lapses unchanged.
func TestContainerAndTTLNodes(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	acl := zk.WorldACL(zk.PermAll)
	p, err := c.CreateContainer("/ctr", nil, zk.FlagContainer, acl)
	if err != nil || p != "/ctr" {
		t.Fatalf("createContainer: %q %v", p, err)
	}
	c.create("/ctr/kid", "", 0)
	_, _, ctrW, err := c.ExistsW("/ctr")
	must(t, "existsW", err)
	p, err = c.CreateTTL("/ttl", []byte("t"), zk.FlagTTL, acl, 300*time.Millisecond)
	if err != nil || p != "/ttl" {
		t.Fatalf("createTTL: %q %v", p, err)
	}
	p, err = c.CreateTTL("/ttlseq-", nil, zk.FlagPersistentSequentialWithTTL, acl, 300*time.Millisecond)
	if err != nil || !strings.HasPrefix(p, "/ttlseq-") {
		t.Fatalf("createTTL sequential: %q %v", p, err)
	}
	ttlSeq := p
	// A TTL node with a child stays while the child does.
	p, err = c.CreateTTL("/ttlparent", nil, zk.FlagTTL, acl, 300*time.Millisecond)
	must(t, "createTTL parent", err)
	c.create("/ttlparent/kid", "", 0)
	// A container that never had a child is left alone.
	if _, err := c.CreateContainer("/never", nil, zk.FlagContainer, acl); err != nil {
		t.Fatal(err)
	}
	// ZooKeeper keeps a TTL node's ttl in its ephemeralOwner but shows
	// clients 0 (DataNode.getClientEphemeralOwner), as for a container.
	if st := c.stat("/ttl"); st.EphemeralOwner != 0 || st.Version != 0 || st.DataLength != 1 {
		t.Errorf("ttl node's stat %+v", st)
	}
	if st := c.stat("/ctr"); st.EphemeralOwner != 0 {
		t.Errorf("container's stat %+v", st)
	}

	must(t, "delete the container's child", c.Delete("/ctr/kid", -1))
	if ev := waitEvent(t, "container removal", ctrW); ev.Type != zk.EventNodeDeleted {
		t.Errorf("container event %+v", ev)
	}
	deadline := time.Now().Add(wait)
	for _, path := range []string{"/ttl", ttlSeq} {
		for {
			ok, _, err := c.Exists(path)
			must(t, "exists", err)
			if !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still there after its ttl", path)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, path := range []string{"/ttlparent", "/never"} {
		if ok, _, _ := c.Exists(path); !ok {
			t.Errorf("%s was removed", path)
		}
	}
}
