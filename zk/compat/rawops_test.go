package compat

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// addWatch (ZooKeeper 3.6+): a persistent watch sees its node's data,
// children, deletion and re-creation and stays; a persistent-recursive watch
// sees creations, changes and deletions of the whole subtree, and no
// child-list events.
func TestPersistentWatches(t *testing.T) {
	cl := newCluster(t, 1)
	c := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	wr := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	c.mustCreate("/p", 0)
	c.mustCreate("/p/a", 0)
	c.mustCreate("/r", 0)
	if e := c.addWatch("/p", 0); e != codeOK {
		t.Fatalf("addWatch persistent: %d", e)
	}
	if e := c.addWatch("/r", 1); e != codeOK {
		t.Fatalf("addWatch persistent recursive: %d", e)
	}
	// A missing node may be watched for its creation.
	if e := c.addWatch("/later", 0); e != codeOK {
		t.Fatalf("addWatch on a missing node: %d", e)
	}
	steps := []struct {
		do   func() int32
		want []rawEvent
	}{
		{func() int32 { return wr.setData("/p", "1") }, []rawEvent{{eventNodeDataChanged, 3, "/p"}}},
		{func() int32 { return wr.create("/p/b", 0) }, []rawEvent{{eventNodeChildrenChanged, 3, "/p"}}},
		{func() int32 { return wr.setData("/p/b", "x") }, nil}, // not recursive
		{func() int32 { return wr.create("/p/b/c", 0) }, nil},
		{func() int32 { return wr.setData("/p", "2") }, []rawEvent{{eventNodeDataChanged, 3, "/p"}}}, // still there
		{func() int32 { return wr.delete("/p/b/c") }, nil},
		{func() int32 { return wr.delete("/p/b") }, []rawEvent{{eventNodeChildrenChanged, 3, "/p"}}},
		{func() int32 { return wr.delete("/p/a") }, []rawEvent{{eventNodeChildrenChanged, 3, "/p"}}},
		{func() int32 { return wr.delete("/p") }, []rawEvent{{eventNodeDeleted, 3, "/p"}}},
		{func() int32 { return wr.create("/p", 0) }, []rawEvent{{eventNodeCreated, 3, "/p"}}}, // survives the delete
		{func() int32 { return wr.create("/later", 0) }, []rawEvent{{eventNodeCreated, 3, "/later"}}},

		{func() int32 { return wr.create("/r/a", 0) }, []rawEvent{{eventNodeCreated, 3, "/r/a"}}},
		{func() int32 { return wr.create("/r/a/b", 0) }, []rawEvent{{eventNodeCreated, 3, "/r/a/b"}}},
		{func() int32 { return wr.setData("/r/a/b", "x") }, []rawEvent{{eventNodeDataChanged, 3, "/r/a/b"}}},
		{func() int32 { return wr.setData("/r", "x") }, []rawEvent{{eventNodeDataChanged, 3, "/r"}}},
		{func() int32 { return wr.delete("/r/a/b") }, []rawEvent{{eventNodeDeleted, 3, "/r/a/b"}}},
		{func() int32 { return wr.create("/rx", 0) }, nil}, // a sibling whose name extends /r
		{func() int32 { return wr.delete("/r/a") }, []rawEvent{{eventNodeDeleted, 3, "/r/a"}}},
	}
	for i, s := range steps {
		before := len(c.eventsNow())
		if e := s.do(); e != codeOK {
			t.Fatalf("step %d: error %d", i, e)
		}
		wr.barrier()
		c.barrier()
		if got := c.eventsNow()[before:]; !slices.Equal(got, s.want) {
			t.Errorf("step %d: events %+v, want %+v", i, got, s.want)
		}
	}

	// checkWatches and removeWatches (type 3: any) for persistent watches.
	if e := c.callErr(opCheckWatches, func(w *jw) { w.str("/r"); w.int(3) }); e != codeOK {
		t.Errorf("checkWatches on a persistent-recursive watch: %d", e)
	}
	if e := c.callErr(opRemoveWatches, func(w *jw) { w.str("/p"); w.int(3) }); e != codeOK {
		t.Errorf("removeWatches on a persistent watch: %d", e)
	}
	if e := c.callErr(opCheckWatches, func(w *jw) { w.str("/p"); w.int(3) }); e != codeNoWatcher {
		t.Errorf("checkWatches after removeWatches: %d, want NoWatcher", e)
	}
	before := len(c.eventsNow())
	wr.setData("/p", "after removal")
	wr.barrier()
	c.barrier()
	if got := c.eventsNow()[before:]; len(got) != 0 {
		t.Errorf("a removed persistent watch fired: %+v", got)
	}
}

// checkWatches and removeWatches on one-shot watches, by type.
func TestCheckAndRemoveWatches(t *testing.T) {
	cl := newCluster(t, 1)
	c := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	wr := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	c.mustCreate("/cw", 0)
	check := func(path string, typ int32) int32 {
		return c.callErr(opCheckWatches, func(w *jw) { w.str(path); w.int(typ) })
	}
	remove := func(path string, typ int32) int32 {
		return c.callErr(opRemoveWatches, func(w *jw) { w.str(path); w.int(typ) })
	}
	const children, data, any = 1, 2, 3
	if e := check("/cw", any); e != codeNoWatcher {
		t.Errorf("checkWatches with no watch: %d", e)
	}
	if e := remove("/cw", any); e != codeNoWatcher {
		t.Errorf("removeWatches with no watch: %d", e)
	}
	if e := c.callErr(opGetData, func(w *jw) { w.str("/cw"); w.bool(true) }); e != codeOK {
		t.Fatal(e)
	}
	if e := check("/cw", children); e != codeNoWatcher {
		t.Errorf("checkWatches children with a data watch: %d", e)
	}
	if e := check("/cw", data); e != codeOK {
		t.Errorf("checkWatches data: %d", e)
	}
	if e := check("/cw", any); e != codeOK {
		t.Errorf("checkWatches any: %d", e)
	}
	if e := c.callErr(opGetChildren, func(w *jw) { w.str("/cw"); w.bool(true) }); e != codeOK {
		t.Fatal(e)
	}
	if e := remove("/cw", data); e != codeOK {
		t.Errorf("removeWatches data: %d", e)
	}
	if e := check("/cw", data); e != codeNoWatcher {
		t.Errorf("checkWatches data after removing it: %d", e)
	}
	if e := check("/cw", children); e != codeOK {
		t.Errorf("the child watch went with the data watch: %d", e)
	}
	// An exists watch on a missing node counts as a data watch.
	if e := c.callErr(opExists, func(w *jw) { w.str("/cw/missing"); w.bool(true) }); e != codeNoNode {
		t.Fatal(e)
	}
	if e := check("/cw/missing", data); e != codeOK {
		t.Errorf("checkWatches on an exists watch of a missing node: %d", e)
	}
	if e := remove("/cw/missing", any); e != codeOK {
		t.Errorf("removeWatches any: %d", e)
	}
	wr.setData("/cw", "x")
	wr.create("/cw/missing", 0)
	wr.barrier()
	c.barrier()
	if got := c.eventsNow(); !slices.Equal(got, []rawEvent{{eventNodeChildrenChanged, 3, "/cw"}}) {
		t.Errorf("events %+v, want only the child watch's", got)
	}
}

// Ops go-zookeeper v1.0.4 does not have: create2, getEphemerals,
// getAllChildrenNumber, multiRead.
func TestNewerOps(t *testing.T) {
	cl := newCluster(t, 1)
	c := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	other := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})

	rep := c.call(opCreate2, func(w *jw) { w.str("/g"); w.buf([]byte("gg")); w.openACL(); w.int(0) })
	r := jr{b: rep.body}
	path, st := r.str(), r.stat()
	if rep.err != codeOK || r.err != nil || path != "/g" || st.Czxid != st.Mzxid || st.Czxid != st.Pzxid ||
		st.Version != 0 || st.DataLength != 2 || st.EphemeralOwner != 0 || rep.zxid != st.Czxid {
		t.Errorf("create2: err %d, %q %+v (reply zxid %d) %v", rep.err, path, st, rep.zxid, r.err)
	}
	c.mustCreate("/g/e1", 1)
	c.mustCreate("/g/p", 0)
	c.mustCreate("/g/p/e2", 1)
	c.mustCreate("/gx", 0)
	c.mustCreate("/gx/e3", 1)
	other.mustCreate("/g/theirs", 1)

	ephemerals := func(conn *rawConn, prefix string) []string {
		rep := conn.call(opGetEphemerals, func(w *jw) { w.str(prefix) })
		r := jr{b: rep.body}
		got := r.strs()
		if rep.err != codeOK || r.err != nil {
			t.Errorf("getEphemerals %s: %d %v", prefix, rep.err, r.err)
		}
		slices.Sort(got)
		return got
	}
	for prefix, want := range map[string][]string{
		"/":        {"/g/e1", "/g/p/e2", "/gx/e3"},
		"/g":       {"/g/e1", "/g/p/e2", "/gx/e3"}, // a string prefix, not a subtree
		"/g/":      {"/g/e1", "/g/p/e2"},
		"/g/p":     {"/g/p/e2"},
		"/nowhere": nil,
	} {
		if got := ephemerals(c, prefix); !slices.Equal(got, want) {
			t.Errorf("getEphemerals %q: %q, want %q", prefix, got, want)
		}
	}
	if got := ephemerals(other, "/"); !slices.Equal(got, []string{"/g/theirs"}) {
		t.Errorf("the other session's ephemerals: %q", got)
	}

	count := func(path string) (int32, int32) {
		rep := c.call(opGetAllChildrenNumber, func(w *jw) { w.str(path) })
		r := jr{b: rep.body}
		return rep.err, r.int()
	}
	for path, want := range map[string]int32{"/g": 4, "/g/p": 1, "/g/e1": 0, "/gx": 1} {
		if e, n := count(path); e != codeOK || n != want {
			t.Errorf("getAllChildrenNumber %s: %d (err %d), want %d", path, n, e, want)
		}
	}
	// The root counts every node but itself, /zookeeper's included.
	if e, n := count("/"); e != codeOK || n != 3+7 {
		t.Errorf("getAllChildrenNumber /: %d (err %d), want 10", n, e)
	}
	if e, _ := count("/nowhere"); e != codeNoNode {
		t.Errorf("getAllChildrenNumber of a missing node: %d", e)
	}

	// multiRead runs every op and reports each failure in place.
	rep = c.call(opMultiRead, func(w *jw) {
		for _, op := range []struct {
			typ  int32
			path string
		}{{opGetData, "/g"}, {opGetChildren, "/g/p"}, {opGetData, "/nowhere"}, {opGetChildren, "/nowhere"}} {
			w.int(op.typ)
			w.bool(false) // done
			w.int(-1)
			w.str(op.path)
			w.bool(false) // watch
		}
		w.int(-1)
		w.bool(true)
		w.int(-1)
	})
	if rep.err != codeOK {
		t.Fatalf("multiRead: %d", rep.err)
	}
	r = jr{b: rep.body}
	type res struct {
		typ, err int32
		data     string
		kids     []string
	}
	var got []res
	for r.err == nil {
		typ, done, herr := r.int(), r.bool(), r.int()
		if done {
			break
		}
		switch typ {
		case opGetData:
			d := r.buf()
			s := r.stat()
			if s.DataLength != int32(len(d)) {
				t.Errorf("multiRead getData stat %+v for %q", s, d)
			}
			got = append(got, res{typ: typ, data: string(d)})
		case opGetChildren:
			got = append(got, res{typ: typ, kids: r.strs()})
		case -1:
			got = append(got, res{typ: typ, err: r.int()})
		default:
			t.Fatalf("multiRead result type %d (err %d)", typ, herr)
		}
	}
	want := []res{{opGetData, 0, "gg", nil}, {opGetChildren, 0, "", []string{"e2"}}, {-1, codeNoNode, "", nil}, {-1, codeNoNode, "", nil}}
	if r.err != nil || len(got) != len(want) {
		t.Fatalf("multiRead: %+v %v", got, r.err)
	}
	for i := range want {
		if got[i].typ != want[i].typ || got[i].err != want[i].err || got[i].data != want[i].data || !slices.Equal(got[i].kids, want[i].kids) {
			t.Errorf("multiRead result %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Paths that are not valid znode paths: writes answer BadArguments
// (where ZooKeeper checks the path before looking for the parent); exists
// refuses a NUL; reads just find no node.
func TestBadPaths(t *testing.T) {
	cl := newCluster(t, 1)
	c := rawConnect(t, cl.Addrs()[0], rawConnectOpts{})
	c.mustCreate("/g", 0)
	type row struct {
		path                             string
		create, delete, setData, getData int32
		exists                           int32
	}
	const bad, none = codeBadArguments, codeNoNode
	for _, r := range []row{
		{"/g/", bad, none, bad, none, none},
		{"g", bad, bad, bad, none, none},
		{"g/x", none, none, bad, none, none},
		{"/g/.", bad, none, bad, none, none},
		{"/g/..", bad, none, bad, none, none},
		{"/g/nul\x00", bad, bad, bad, none, bad},
		{"/g//x", none, none, bad, none, none},
		{"", bad, bad, bad, codeOK, codeOK}, // reads of "" find the root
		{"/zookeeper/quota", codeNodeExists, bad, codeOK, codeOK, codeOK},
	} {
		p := r.path
		if e := c.create(p, 0); e != r.create {
			t.Errorf("create %q: %d, want %d", p, e, r.create)
		}
		if e := c.delete(p); e != r.delete {
			t.Errorf("delete %q: %d, want %d", p, e, r.delete)
		}
		if e := c.setData(p, ""); e != r.setData {
			t.Errorf("setData %q: %d, want %d", p, e, r.setData)
		}
		if e := c.callErr(opGetData, func(w *jw) { w.str(p); w.bool(false) }); e != r.getData {
			t.Errorf("getData %q: %d, want %d", p, e, r.getData)
		}
		if e := c.callErr(opExists, func(w *jw) { w.str(p); w.bool(false) }); e != r.exists {
			t.Errorf("exists %q: %d, want %d", p, e, r.exists)
		}
	}
	if e := c.delete("/"); e != bad {
		t.Errorf("delete /: %d", e)
	}
	if e := c.delete("/zookeeper"); e != bad {
		t.Errorf("delete /zookeeper: %d", e)
	}
	// Nothing was created.
	rep := c.call(opGetChildren, func(w *jw) { w.str("/g"); w.bool(false) })
	r := jr{b: rep.body}
	if kids := r.strs(); rep.err != codeOK || len(kids) != 0 {
		t.Errorf("children of /g: %q (err %d)", kids, rep.err)
	}
}

// The handshake: timeout negotiation, re-attach with the password, refusal
// of a wrong password, of an unknown session and of a client that has seen
// a newer zxid than the cluster.
func TestHandshake(t *testing.T) {
	cl := newCluster(t, 1)
	addr := cl.Addrs()[0]
	for ask, want := range map[int32]int32{1: 200, 50: 200, 5000: 5000, 100000: 20000} {
		if c := rawConnect(t, addr, rawConnectOpts{timeoutMs: ask}); c.Timeout != want || c.SessionID == 0 || len(c.Passwd) != 16 {
			t.Errorf("asked for %d ms: got %d ms, session %x, password %x", ask, c.Timeout, c.SessionID, c.Passwd)
		}
	}

	c := rawConnect(t, addr, rawConnectOpts{})
	c.mustCreate("/h", 1)
	id, pw := c.SessionID, c.Passwd

	// A wrong password: a zero session and a closed connection. (ZooKeeper
	// 3.8 also drops the session's current connection, which coord does
	// not; neither ends the session.)
	wrong := append([]byte(nil), pw...)
	wrong[0] ^= 0xff
	r := rawConnect(t, addr, rawConnectOpts{sessionID: id, passwd: wrong})
	if r.SessionID != 0 || r.Timeout != 0 {
		t.Errorf("wrong password: session %x, timeout %d; want 0, 0", r.SessionID, r.Timeout)
	}
	expectClosed(t, "after a wrong password", r)

	// The right password re-attaches to the same session.
	re := rawConnect(t, addr, rawConnectOpts{sessionID: id, passwd: pw})
	if re.SessionID != id || re.Timeout != 10000 {
		t.Errorf("re-attach: session %x timeout %d, want %x 10000", re.SessionID, re.Timeout, id)
	}
	re.barrier()
	if e := re.create("/h", 1); e != codeNodeExists {
		t.Errorf("the session's ephemeral after re-attach: create again gives %d", e)
	}
	re.closeSession()

	// A closed session cannot be re-attached to.
	gone := rawConnect(t, addr, rawConnectOpts{sessionID: id, passwd: pw})
	if gone.SessionID != 0 {
		t.Errorf("re-attach to a closed session: session %x", gone.SessionID)
	}
	expectClosed(t, "after re-attaching to a closed session", gone)
	check := rawConnect(t, addr, rawConnectOpts{})
	if e := check.callErr(opExists, func(w *jw) { w.str("/h"); w.bool(false) }); e != codeNoNode {
		t.Errorf("the closed session's ephemeral: exists gives %d", e)
	}

	// A client that has seen a zxid the server has not is refused: the
	// server closes the connection without a session.
	nc := rawDial(t, addr, rawConnectOpts{lastZxid: 1 << 60})
	if b, err := readUntilClosed(nc, 3*wait); err != errClosedByServer || len(b) != 0 {
		t.Errorf("client ahead of the server: read %d bytes, %v; want the connection closed with no reply", len(b), err)
	}
}

// Malformed input ends the offending connection only.
func TestBadInput(t *testing.T) {
	cl := newCluster(t, 1)
	addr := cl.Addrs()[0]
	bystander := rawConnect(t, addr, rawConnectOpts{})

	// An unknown op: Unimplemented (zxid -1), then the connection closes.
	c := rawConnect(t, addr, rawConnectOpts{})
	rep := c.call(999, nil)
	if rep.err != codeUnimplement || rep.zxid != -1 {
		t.Errorf("unknown op: err %d zxid %d, want %d and -1", rep.err, rep.zxid, codeUnimplement)
	}
	expectClosed(t, "after an unknown op", c)

	// A frame longer than jute.maxbuffer (1 MiB) closes the connection.
	c = rawConnect(t, addr, rawConnectOpts{})
	var w jw
	w.int(1)
	w.int(opSetData)
	w.str("/")
	w.buf(make([]byte, 2<<20))
	w.int(-1)
	c.writeFrame(w.b) // may fail half-way once the server closes
	expectClosed(t, "after an oversize frame", c)

	// A request before the handshake is read as a (bad) connect request.
	nc, err := dialPlain(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte{0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 3})
	if b, err := readUntilClosed(nc, wait); err != errClosedByServer || len(b) != 0 {
		t.Errorf("request before connect: read %q, %v; want a close", b, err)
	}

	bystander.barrier()
	if e := bystander.create("/still-here", 0); e != codeOK {
		t.Errorf("bystander: %d", e)
	}
}

func expectClosed(t testing.TB, what string, c *rawConn) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(wait):
		t.Errorf("%s: the server kept the connection open", what)
	}
}

// Re-attaching with setWatches2: one-shot watches whose nodes changed while
// the client was away fire at once with the right type, the others and the
// persistent watches are re-armed (without catch-up events).
func TestSetWatchesOnReattach(t *testing.T) {
	cl := newCluster(t, 1)
	addr := cl.Addrs()[0]
	a := rawConnect(t, addr, rawConnectOpts{})
	wr := rawConnect(t, addr, rawConnectOpts{})
	for _, p := range []string{"/s", "/s/changed", "/s/deleted", "/s/same", "/s/kids", "/s/gone", "/s/pr"} {
		a.mustCreate(p, 0)
	}
	a.barrier()
	id, pw, last := a.SessionID, a.Passwd, a.lastZxid.Load()
	a.nc.Close() // a is away; its session lives on

	wr.setData("/s/changed", "x")
	wr.delete("/s/deleted")
	wr.create("/s/born", 0)
	wr.create("/s/kids/k", 0)
	wr.delete("/s/gone")
	wr.create("/s/pr/missed", 0)
	wr.setData("/s/pr", "missed")

	re := rawConnect(t, addr, rawConnectOpts{sessionID: id, passwd: pw, lastZxid: last})
	if re.SessionID != id {
		t.Fatalf("re-attach: session %x, want %x", re.SessionID, id)
	}
	e := re.callErr(opSetWatches2, func(w *jw) {
		w.long(last)
		w.strs([]string{"/s/changed", "/s/deleted", "/s/same"}) // data
		w.strs([]string{"/s/born", "/s/unborn"})                // exist
		w.strs([]string{"/s/kids", "/s/gone", "/s/same"})       // child
		w.strs([]string{"/s/pr"})                               // persistent
		w.strs([]string{"/s"})                                  // persistent recursive
	})
	if e != codeOK {
		t.Fatalf("setWatches2: %d", e)
	}
	got := re.eventsNow()
	slices.SortFunc(got, func(x, y rawEvent) int { return strings.Compare(x.path, y.path) })
	want := []rawEvent{
		{eventNodeCreated, 3, "/s/born"},
		{eventNodeDataChanged, 3, "/s/changed"},
		{eventNodeDeleted, 3, "/s/deleted"},
		{eventNodeDeleted, 3, "/s/gone"},
		{eventNodeChildrenChanged, 3, "/s/kids"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events on re-attach: %+v, want %+v", got, want)
	}

	// The re-armed watches fire for later changes.
	n := len(re.eventsNow())
	wr.setData("/s/same", "now") // data watch: NodeDataChanged; recursive on /s: the same event
	wr.create("/s/unborn", 0)    // exist watch and recursive: NodeCreated
	wr.setData("/s/pr", "now")   // persistent and recursive: NodeDataChanged
	wr.create("/s/pr/later", 0)  // persistent: NodeChildrenChanged /s/pr; recursive: NodeCreated
	wr.barrier()
	re.barrier()
	got = re.eventsNow()[n:]
	want = []rawEvent{
		{eventNodeDataChanged, 3, "/s/same"},
		{eventNodeCreated, 3, "/s/unborn"},
		{eventNodeDataChanged, 3, "/s/pr"},
		{eventNodeCreated, 3, "/s/pr/later"},
		{eventNodeChildrenChanged, 3, "/s/pr"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events after re-attach: %+v, want %+v", got, want)
	}
}
