package compat

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// A session re-attaches to another server of a 3-server cluster when its
// server dies, keeping its id, its ephemerals and its watches: a watch whose
// node changed while the client was away fires on re-attach, and one whose
// node changes later fires then.
func TestSessionReattachKeepsWatches(t *testing.T) {
	for _, victim := range []string{"follower", "leader"} {
		t.Run("kill the "+victim, func(t *testing.T) { testReattach(t, victim == "leader") })
	}
}

func testReattach(t *testing.T, killLeader bool) {
	cl := newCluster(t, 3)
	leader := cl.Leader()
	victim := (leader + 1) % 3
	if killLeader {
		victim = leader
	}
	survivor := (victim + 1) % 3 // b's server
	d := newDialer(cl.Addr(victim))
	a := connect(t, "a", cl.Addrs(), clientOpts{dialer: d, timeout: 8 * time.Second})
	if a.Server() != cl.Addr(victim) {
		t.Fatalf("a is on %s, want %s", a.Server(), cl.Addr(victim))
	}
	b := connect(t, "b", []string{cl.Addr(survivor)}, clientOpts{})

	a.create("/ra", "", 0)
	a.create("/ra/x", "0", 0)
	a.create("/ra/y", "0", 0)
	a.create("/ra/quiet", "0", 0)
	eph := a.create("/ra/eph", "", zk.FlagEphemeral)
	_, _, xW, err := a.GetW("/ra/x") // changes while a is away
	must(t, "getW", err)
	_, _, kidsW, err := a.ChildrenW("/ra") // gets a child while a is away
	must(t, "childrenW", err)
	_, _, newW, err := a.ExistsW("/ra/new") // created while a is away
	must(t, "existsW", err)
	_, _, yW, err := a.GetW("/ra/y") // changes after a is back
	must(t, "getW", err)
	_, _, quietW, err := a.GetW("/ra/quiet") // never changes
	must(t, "getW", err)
	id := a.SessionID()

	// Kill a's server and keep a away until b has made its changes.
	d.holdDials()
	d.allow()
	m := a.mark()
	cl.Kill(victim)
	a.waitStateSince(m, zk.StateDisconnected)
	retry(t, "set /ra/x", func() error { return errOf(b.Set("/ra/x", []byte("1"), -1)) })
	retry(t, "create /ra/new", func() error {
		return ignore(errOf(b.Create("/ra/new", nil, 0, zk.WorldACL(zk.PermAll))), zk.ErrNodeExists)
	})
	d.release()
	a.waitStateSince(m, zk.StateHasSession)
	if a.SessionID() != id {
		t.Fatalf("a has session %x after the move, want %x", a.SessionID(), id)
	}
	if a.Server() == cl.Addr(victim) {
		t.Fatalf("a is still on the dead server %s", a.Server())
	}
	for name, w := range map[string]struct {
		ch   <-chan zk.Event
		typ  zk.EventType
		path string
	}{
		"data watch": {xW, zk.EventNodeDataChanged, "/ra/x"}, "child watch": {kidsW, zk.EventNodeChildrenChanged, "/ra"},
		"exists watch": {newW, zk.EventNodeCreated, "/ra/new"},
	} {
		if ev := waitEvent(t, name+" for a change made during the move", w.ch); ev.Type != w.typ || ev.Path != w.path {
			t.Errorf("%s: event %+v, want %v %s", name, ev, w.typ, w.path)
		}
	}

	// A watch set before the move fires for a change made after it.
	retry(t, "set /ra/y", func() error { return errOf(b.Set("/ra/y", []byte("1"), -1)) })
	if ev := waitEvent(t, "data watch for a change made after the move", yW); ev.Type != zk.EventNodeDataChanged || ev.Path != "/ra/y" {
		t.Errorf("event %+v", ev)
	}
	a.barrier()
	noEvent(t, "watch on an unchanged node", quietW)
	for _, p := range []string{"/ra/x", "/ra/new", "/ra/y"} {
		if evs := a.nodeEvents(p); len(evs) != 1 {
			t.Errorf("events for %s: %v, want exactly one", p, evs)
		}
	}

	// The session kept its ephemeral, and a reads what b wrote.
	if st := a.stat(eph); st.EphemeralOwner != id {
		t.Errorf("ephemeral after the move: %+v", st)
	}
	if d, _, err := a.Get("/ra/x"); err != nil || string(d) != "1" {
		t.Errorf("a reads /ra/x = %q, %v", d, err)
	}
	// And its writes still work.
	a.create("/ra/after", "", 0)
}

// A client that stops heartbeating loses its session after the timeout: its
// ephemerals vanish, other sessions' watchers are told, and the client,
// coming back, learns its session expired.
func TestSessionExpiry(t *testing.T) {
	cl := newCluster(t, 3)
	follower := (cl.Leader() + 1) % 3
	d := newDialer(cl.Addr(follower))
	const timeout = 2 * time.Second
	a := connect(t, "a", cl.Addrs(), clientOpts{dialer: d, timeout: timeout})
	w := connect(t, "w", cl.Addrs(), clientOpts{})
	a.create("/x", "", 0)
	eph := a.create("/x/e", "", zk.FlagEphemeral)
	_, _, aW, err := a.GetW("/x")
	must(t, "getW", err)

	// Heartbeating, the session outlives its timeout.
	time.Sleep(3 * timeout / 2)
	if ok, _, _ := w.Exists(eph); !ok {
		t.Fatal("an ephemeral vanished while its session heartbeats")
	}
	_, _, ephW, err := w.ExistsW(eph)
	must(t, "existsW", err)
	_, _, kidsW, err := w.ChildrenW("/x")
	must(t, "childrenW", err)

	m := a.mark()
	id := a.SessionID()
	d.holdDials()
	start := time.Now()
	d.freeze()
	if ev := waitEvent(t, "exists watch on the expired session's ephemeral", ephW); ev.Type != zk.EventNodeDeleted || ev.Path != eph {
		t.Errorf("event %+v", ev)
	}
	// The last heartbeat was at most a third of the timeout before the
	// freeze, so the session cannot end before two thirds of it.
	if el := time.Since(start); el < timeout/2 {
		t.Errorf("session expired %v after the client went silent; its timeout is %v", el, timeout)
	}
	if ev := waitEvent(t, "child watch", kidsW); ev.Type != zk.EventNodeChildrenChanged || ev.Path != "/x" {
		t.Errorf("event %+v", ev)
	}
	if kids, _, err := w.Children("/x"); err != nil || len(kids) != 0 {
		t.Errorf("children of /x after expiry: %v %v", kids, err)
	}

	a.waitStateSince(m, zk.StateDisconnected)
	d.release()
	a.waitStateSince(m, zk.StateExpired)
	// go-zookeeper ends the expired session's watches with ErrSessionExpired
	// (and then opens a new session).
	if ev := waitEvent(t, "a's own watch", aW); ev.Type != zk.EventNotWatching || !errors.Is(ev.Err, zk.ErrSessionExpired) {
		t.Errorf("a's watch: %+v, want NotWatching with ErrSessionExpired", ev)
	}
	a.waitStateSince(m, zk.StateHasSession)
	if a.SessionID() == id {
		t.Errorf("a re-attached to its expired session %x", id)
	}
	if ok, _, err := a.Exists("/x"); !ok || err != nil {
		t.Errorf("a's new session: exists /x: %v %v", ok, err)
	}
}

// waitStateSince waits for a session event with state s after mark m.
func (c *client) waitStateSince(m int, s zk.State) zk.Event {
	c.t.Helper()
	ev, ok := c.rec.waitForSince(m, func(e zk.Event) bool { return e.Type == zk.EventSession && e.State == s }, 2*wait)
	if !ok {
		c.t.Fatalf("%s: no session event %v within %v (state %v); events since: %v", c.name, s, 2*wait, c.State(), c.rec.since(m))
	}
	return ev
}

// retry runs op until it succeeds, retrying while the client has no
// working connection (a server died and the cluster is choosing a leader).
// ZooKeeper never sends ConnectionLoss (-4) as a reply's error (it is what
// a client concludes when its connection drops, and go-zookeeper does not
// even name it); a reply carrying it is reported, and retried.
func retry(t testing.TB, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		if err == nil {
			return
		}
		if err.Error() == connectionLossReply {
			t.Errorf("%s: the server answered with ConnectionLoss (-4) instead of dropping the connection", what)
		} else if !errors.Is(err, zk.ErrConnectionClosed) && !errors.Is(err, zk.ErrNoServer) {
			t.Fatalf("%s: %v", what, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 30s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectionLossReply is how go-zookeeper reports a reply whose error code
// is ConnectionLoss (-4).
const connectionLossReply = "unknown error: -4"

// Writes in flight or sent while the leader is gone: ZooKeeper's followers
// drop their clients' connections when they lose the leader, so such a
// write fails on the client's side (go-zookeeper: ErrConnectionClosed) and
// the client re-sends it once it has reconnected. No reply ever carries an
// error code for the lost leader.
func TestWritesDuringLeaderLoss(t *testing.T) {
	cl := newCluster(t, 3)
	leader := cl.Leader()
	followers := []string{cl.Addr((leader + 1) % 3), cl.Addr((leader + 2) % 3)}
	const writers = 4
	var cs []*client
	for i := 0; i < writers; i++ {
		cs = append(cs, connect(t, fmt.Sprintf("w%d", i), followers, clientOpts{}))
		cs[i].create(fmt.Sprintf("/wl%d", i), "", 0)
	}
	killed := make(chan struct{})
	type outcome struct {
		okAfter         int
		lossReplies     int
		connectionDrops int
		other           []error
	}
	results := make([]outcome, writers)
	done := make(chan int)
	for i, c := range cs {
		go func() {
			defer func() { done <- i }()
			o := &results[i]
			deadline := time.Now().Add(30 * time.Second)
			after := false
			for o.okAfter < 20 && time.Now().Before(deadline) {
				select {
				case <-killed:
					after = true
				default:
				}
				_, err := c.Set(fmt.Sprintf("/wl%d", i), []byte("x"), -1)
				switch {
				case err == nil:
					if after {
						o.okAfter++
					}
				case err.Error() == connectionLossReply:
					o.lossReplies++
				case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer):
					o.connectionDrops++
					time.Sleep(20 * time.Millisecond)
				default:
					o.other = append(o.other, err)
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond) // writes flowing
	cl.Kill(leader)
	close(killed)
	for range cs {
		<-done
	}
	for i, o := range results {
		if o.okAfter < 20 || len(o.other) > 0 {
			t.Errorf("writer %d: %d writes after the kill, errors %v", i, o.okAfter, o.other)
		}
		if o.lossReplies > 0 {
			t.Errorf("writer %d: %d replies with ConnectionLoss (-4); ZooKeeper drops the connection instead (%d drops seen)",
				i, o.lossReplies, o.connectionDrops)
		}
	}
}

// ignore maps the listed errors to nil (a retried create may find its own
// node).
func ignore(err error, ok ...error) error {
	for _, o := range ok {
		if errors.Is(err, o) {
			return nil
		}
	}
	return err
}

// sync: a client on another server that syncs after learning of a write
// out of band (here: the test) then reads it. Without sync ZooKeeper
// promises such a client nothing fresher, which is why kazoo's recipes in
// kazoo_recipes.py sync where news arrives out of band.
func TestSyncMakesWritesVisible(t *testing.T) {
	cl := newCluster(t, 3)
	leader := cl.Leader()
	w := connect(t, "writer", []string{cl.Addr(leader)}, clientOpts{})
	readers := []*client{
		connect(t, "r1", []string{cl.Addr((leader + 1) % 3)}, clientOpts{}),
		connect(t, "r2", []string{cl.Addr((leader + 2) % 3)}, clientOpts{}),
	}
	w.create("/sync", "", 0)
	for i := 0; i < 50; i++ {
		p := fmt.Sprintf("/sync/n%d", i)
		w.create(p, "", 0)
		for _, r := range readers {
			got, err := r.Sync(p)
			if err != nil || got != p {
				t.Fatalf("%s: sync %s: %q %v", r.name, p, got, err)
			}
			if ok, _, err := r.Exists(p); !ok || err != nil {
				t.Fatalf("%s: %s not visible after sync (%v)", r.name, p, err)
			}
		}
	}
	// sync of a path that does not exist is fine too.
	if got, err := readers[0].Sync("/no/such/node"); err != nil || got != "/no/such/node" {
		t.Errorf("sync of a missing path: %q %v", got, err)
	}
}

// A session that re-attached elsewhere has moved: its old connection may
// still read, but a write sent on it is refused (ZooKeeper's SessionMoved:
// not applied, no success reply, the connection closed), so requests that
// were stuck on the old path cannot land after newer ones. Re-attaching on
// the same server closes the old connection at once.
func TestSessionMoved(t *testing.T) {
	cl := newCluster(t, 3)
	old := rawConnect(t, cl.Addr(0), rawConnectOpts{})
	old.mustCreate("/moved", 0)
	moved := rawConnect(t, cl.Addr(1), rawConnectOpts{sessionID: old.SessionID, passwd: old.Passwd, lastZxid: old.lastZxid.Load()})
	if moved.SessionID != old.SessionID {
		t.Fatalf("re-attach: session %x, want %x", moved.SessionID, old.SessionID)
	}
	moved.barrier()

	// A write on the old connection.
	old.xid++
	var w jw
	w.int(old.xid)
	w.int(opCreate)
	w.str("/moved/stale")
	w.buf(nil)
	w.openACL()
	w.int(0)
	if err := old.writeFrame(w.b); err != nil {
		t.Fatal(err)
	}
	select {
	case rep := <-old.replies:
		if rep.err == codeOK {
			t.Errorf("a write on the session's old connection succeeded (reply %+v); ZooKeeper refuses it (SessionMoved)", rep)
		}
	case <-old.closed:
	case <-time.After(wait):
		t.Errorf("no reply and no close for a write on the session's old connection")
	}
	expectClosed(t, "the old connection after a write", old)
	if e := moved.create("/moved/fresh", 0); e != codeOK {
		t.Errorf("a write on the new connection: %d", e)
	}
	rep := moved.call(opGetChildren, func(w *jw) { w.str("/moved"); w.bool(false) })
	r := jr{b: rep.body}
	if kids := r.strs(); !slices.Equal(kids, []string{"fresh"}) {
		t.Errorf("children of /moved: %q, want only the new connection's node", kids)
	}

	// Re-attaching on the server that holds the connection replaces it.
	again := rawConnect(t, cl.Addr(1), rawConnectOpts{sessionID: moved.SessionID, passwd: moved.Passwd, lastZxid: moved.lastZxid.Load()})
	if again.SessionID != moved.SessionID {
		t.Fatalf("re-attach on the same server: session %x", again.SessionID)
	}
	expectClosed(t, "the replaced connection on the same server", moved)
	again.barrier()
}
