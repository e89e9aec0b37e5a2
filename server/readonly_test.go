package server

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"coord/server/sessions"
	"coord/vocab"
	"coord/zk"
)

// tryConnect sends a connect request and returns the answer, or ok false
// if the server closed the connection unanswered.
func (r *rawZK) tryConnect(req zk.ConnectRequest) (zk.ConnectResponse, bool) {
	r.t.Helper()
	if _, err := r.nc.Write(zk.AppendFrame(nil, &req)); err != nil {
		return zk.ConnectResponse{}, false
	}
	frame, err := zk.ReadFrame(r.br, zk.DefaultMaxFrame)
	if err != nil {
		return zk.ConnectResponse{}, false
	}
	var resp zk.ConnectResponse
	if err := zk.Unmarshal(frame, &resp); err != nil {
		r.t.Fatal(err)
	}
	return resp, true
}

// do sends one request and returns its reply's header, decoding the body
// into body when the reply is OK.
func (r *rawZK) do(xid int32, op zk.OpCode, req, body zk.Record) zk.ReplyHeader {
	r.t.Helper()
	if _, err := r.nc.Write(zk.AppendRequest(nil, zk.RequestHeader{Xid: xid, Type: op}, req)); err != nil {
		r.t.Fatal(err)
	}
	frame, err := zk.ReadFrame(r.br, zk.DefaultMaxFrame)
	if err != nil {
		r.t.Fatalf("op %v: reading reply: %v", op, err)
	}
	h, err := zk.DecodeReply(frame, body)
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// connectAnswered connects to addr with req until the server answers
// (a server may close a connection unanswered while it cannot reach its
// leader), for at most 10 s, and returns the answer and its connection.
func connectAnswered(t *testing.T, addr string, req zk.ConnectRequest) (zk.ConnectResponse, *rawZK, bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r := dialZK(t, addr)
		if resp, ok := r.tryConnect(req); ok || time.Now().After(deadline) {
			return resp, r, ok
		}
	}
}

// closedWithin reports whether the server closed the connection within d.
func (r *rawZK) closedWithin(d time.Duration) bool {
	r.nc.SetReadDeadline(time.Now().Add(d))
	_, err := r.br.ReadByte()
	return errors.Is(err, io.EOF)
}

func waitFourLetter(t *testing.T, addr, cmd, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := fourLetter(t, addr, cmd)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on %s: %q after %v, want %q", cmd, addr, got, d, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Read-only mode (ZooKeeper's ReadOnlyZooKeeperServer): a server cut off
// from the quorum serves reads to clients that accept a read-only server,
// with a local session, refuses their writes and syncs with NotReadOnly,
// refuses clients that did not ask and sessions of the cluster, says "ro" to isro and "read-only" in srvr; once it is
// back with a leader it closes the read-only connections, forgets the
// local sessions and says "rw".
func TestReadOnlyMode(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.ReadOnlyMode = true })
	victim := (c.Leader() + 1) % 3
	addr := c.Servers[victim].ZKAddr()

	rw := dialZK(t, addr)
	resp := rw.connect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
	if resp.SessionID == 0 || resp.ReadOnly || !resp.HasReadOnly {
		t.Fatalf("read-write connect of a read-only-capable client: %+v", resp)
	}
	cluster := resp
	if h := rw.do(1, zk.OpCreate, &zk.CreateRequest{Path: "/ro", Data: []byte("x"), ACL: vocab.OpenACLUnsafe}, nil); h.Err != vocab.OK {
		t.Fatalf("create /ro: %v", h.Err)
	}
	if got := fourLetter(t, addr, "isro"); got != "rw" {
		t.Fatalf("isro with a quorum: %q", got)
	}
	c.WaitConverged()

	c.Isolate(victim)
	healed := false
	t.Cleanup(func() {
		if !healed {
			c.Heal(victim)
		}
	})
	waitFourLetter(t, addr, "isro", "ro", 10*time.Second)
	if srvr := fourLetter(t, addr, "srvr"); !strings.Contains(srvr, "READ-ONLY mode") || !strings.Contains(srvr, "Mode: read-only\n") {
		t.Errorf("srvr in read-only mode:\n%s", srvr)
	}
	if !rw.closedWithin(8 * time.Second) {
		t.Error("the read-write connection stayed open on a server cut off from the quorum")
	}

	// A client that does not accept a read-only server is refused.
	if r, ok := dialZK(t, addr).tryConnect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), HasReadOnly: true}); ok {
		t.Errorf("a read-write client got a session from the read-only server: %+v", r)
	}

	// A new read-only client: a local session.
	ro := dialZK(t, addr)
	lresp := ro.connect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true})
	if !lresp.ReadOnly || lresp.TimeOut != 10000 || !sessions.IsLocalSession(lresp.SessionID) {
		t.Fatalf("read-only connect: %+v", lresp)
	}
	var gd zk.GetDataResponse
	if h := ro.do(1, zk.OpGetData, &zk.GetDataRequest{Path: "/ro"}, &gd); h.Err != vocab.OK || string(gd.Data) != "x" {
		t.Fatalf("getData on the read-only server: %v %q", h.Err, gd.Data)
	}
	for i, w := range []struct {
		op  zk.OpCode
		req zk.Record
	}{
		{zk.OpCreate, &zk.CreateRequest{Path: "/new", ACL: vocab.OpenACLUnsafe}},
		{zk.OpSetData, &zk.SetDataRequest{Path: "/ro", Data: []byte("y"), Version: -1}},
		{zk.OpDelete, &zk.DeleteRequest{Path: "/ro", Version: -1}},
		{zk.OpSync, &zk.SyncRequest{Path: "/"}},
	} {
		if h := ro.do(int32(2+i), w.op, w.req, nil); h.Err != vocab.NotReadOnly || h.Xid != int32(2+i) {
			t.Errorf("op %v on a read-only session: %+v, want NotReadOnly", w.op, h)
		}
	}
	if h := ro.do(-2, zk.OpPing, nil, nil); h.Err != vocab.OK {
		t.Errorf("ping: %v", h.Err)
	}

	// A session of the cluster is refused, as ZooKeeper 3.8 refuses a
	// "global session reconnection in RO mode".
	if r, ok := dialZK(t, addr).tryConnect(zk.ConnectRequest{TimeOut: 10000, SessionID: cluster.SessionID, Passwd: cluster.Passwd, ReadOnly: true, HasReadOnly: true}); ok {
		t.Errorf("a cluster session re-attached to the read-only server: %+v", r)
	}
	// A local session re-attaches (its client came back within its timeout).
	ro.nc.Close()
	back := dialZK(t, addr)
	if r := back.connect(zk.ConnectRequest{TimeOut: 10000, SessionID: lresp.SessionID, Passwd: lresp.Passwd, ReadOnly: true, HasReadOnly: true}); r.SessionID != lresp.SessionID || !r.ReadOnly {
		t.Fatalf("re-attaching a local session: %+v", r)
	}
	if h := back.do(1, zk.OpExists, &zk.ExistsRequest{Path: "/ro"}, &zk.ExistsResponse{}); h.Err != vocab.OK {
		t.Errorf("exists: %v", h.Err)
	}
	// A wrong password is still refused.
	if r, ok := dialZK(t, addr).tryConnect(zk.ConnectRequest{TimeOut: 10000, SessionID: lresp.SessionID, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true}); !ok || r.SessionID != 0 {
		t.Errorf("a local session with a wrong password: %+v %v", r, ok)
	}

	c.Heal(victim)
	healed = true
	if !back.closed() {
		t.Error("read-only connections stayed open after the server found its leader again")
	}
	waitFourLetter(t, addr, "isro", "rw", 10*time.Second)
	// The server serves again (raft's heartbeats reach it) before it holds
	// the log: hashicorp/raft's leader retries entries for a follower it
	// could not reach after a backoff that doubles with each failure, up
	// to 10 s (its heartbeats back off at most half a heartbeat timeout).
	// The lookups below need what the leader committed meanwhile.
	c.WaitConverged()
	// The local session is gone: expired, as ZooKeeper's read-write server
	// answers it.
	// A server that cannot confirm a session with its leader in time (a
	// busy machine) closes the connection unanswered, and a client tries
	// again: so do these.
	if r, _, ok := connectAnswered(t, addr, zk.ConnectRequest{TimeOut: 10000, SessionID: lresp.SessionID, Passwd: lresp.Passwd, ReadOnly: true, HasReadOnly: true}); !ok || r.SessionID != 0 || r.TimeOut != 0 {
		t.Errorf("a local session on the read-write server: %+v %v, want expired", r, ok)
	}
	aresp, again, ok := connectAnswered(t, addr, zk.ConnectRequest{TimeOut: 10000, SessionID: cluster.SessionID, Passwd: cluster.Passwd, ReadOnly: true, HasReadOnly: true})
	if !ok || aresp.SessionID != cluster.SessionID || aresp.ReadOnly {
		t.Fatalf("re-attaching the cluster session read-write: %+v", aresp)
	}
	if h := again.do(1, zk.OpSetData, &zk.SetDataRequest{Path: "/ro", Data: []byte("y"), Version: -1}, &zk.SetDataResponse{}); h.Err != vocab.OK {
		t.Errorf("setData after the heal: %v", h.Err)
	}
}

// Without read-only mode (the default, as ZooKeeper's) a cut-off server
// refuses read-only clients too and isro says "null".
func TestReadOnlyModeOff(t *testing.T) {
	t.Parallel()
	// isro is not in the default whitelist (nor in ZooKeeper's).
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.FourLetterWords = []string{"isro"} })
	victim := (c.Leader() + 1) % 3
	addr := c.Servers[victim].ZKAddr()
	c.Isolate(victim)
	t.Cleanup(func() { c.Heal(victim) })
	waitFourLetter(t, addr, "isro", "null", 10*time.Second)
	if r, ok := dialZK(t, addr).tryConnect(zk.ConnectRequest{TimeOut: 10000, Passwd: make([]byte, 16), ReadOnly: true, HasReadOnly: true}); ok {
		t.Errorf("a read-only client got a session with read-only mode off: %+v", r)
	}
}

// The read-only grace, as ZooKeeper 3.8's: a server goes read-only only
// max(2 s, tick) after it stopped serving (ZooKeeper: after it started
// looking for a leader), and a restarted server, which has heard from no
// leader yet, only that long after it started. Meanwhile it refuses
// read-only clients and isro says "null". A server restarted beside a
// live leader never goes read-only: clients that reconnect at once get
// read-write sessions, a cluster session included.
func TestReadOnlyGrace(t *testing.T) {
	t.Parallel()
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.ReadOnlyMode = true })
	victim := (c.Leader() + 1) % 3
	grace := c.Servers[victim].readOnlyGrace()
	if grace != 2*time.Second {
		t.Fatalf("grace %v with tick %v, want 2s", grace, c.Configs[victim].Tick)
	}
	readOnlyConnect := func(addr string, id int64, pw []byte) (zk.ConnectResponse, bool) {
		if pw == nil {
			pw = make([]byte, 16)
		}
		return dialZK(t, addr).tryConnect(zk.ConnectRequest{TimeOut: 10000, SessionID: id, Passwd: pw, ReadOnly: true, HasReadOnly: true})
	}
	addr := c.Servers[victim].ZKAddr()
	cluster, _ := readOnlyConnect(addr, 0, nil)
	if cluster.SessionID == 0 || cluster.ReadOnly {
		t.Fatalf("connect with a quorum: %+v", cluster)
	}
	c.WaitConverged()

	// Cut off: not serving first, read-only a grace later.
	c.Isolate(victim)
	waitFourLetter(t, addr, "isro", "null", 10*time.Second)
	stopped := time.Now()
	if r, ok := readOnlyConnect(addr, 0, nil); ok {
		t.Errorf("a read-only session %v into the grace: %+v", time.Since(stopped), r)
	}
	waitFourLetter(t, addr, "isro", "ro", grace+5*time.Second)
	if d := time.Since(stopped); d < grace-100*time.Millisecond {
		t.Errorf("read-only %v after the server stopped serving, before the grace of %v", d, grace)
	}
	if r, ok := readOnlyConnect(addr, 0, nil); !ok || !r.ReadOnly {
		t.Errorf("no read-only session after the grace: %+v %v", r, ok)
	}
	c.Heal(victim)
	waitFourLetter(t, addr, "isro", "rw", 10*time.Second)

	// Restarted beside a live leader, clients reconnecting at once: they
	// get read-write sessions, never a read-only one.
	s := c.Restart(victim)
	addr = s.ZKAddr()
	started := time.Now()
	got := make(chan zk.ConnectResponse, 4)
	for i := 0; i < 4; i++ {
		go func() {
			for time.Since(started) < 2*grace {
				var r zk.ConnectResponse
				var ok bool
				if i == 0 {
					r, ok = readOnlyConnect(addr, cluster.SessionID, cluster.Passwd)
				} else {
					r, ok = readOnlyConnect(addr, 0, nil)
				}
				if ok && r.SessionID != 0 {
					got <- r
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			got <- zk.ConnectResponse{}
		}()
	}
	for i := 0; i < 4; i++ {
		r := <-got
		if r.SessionID == 0 || r.ReadOnly || sessions.IsLocalSession(r.SessionID) {
			t.Errorf("a client reconnecting at once to the restarted server: %+v, want a read-write session", r)
		}
	}

	// Restarted with no leader to find: read-only only a grace after the
	// start.
	for i := range c.Servers {
		if i != victim {
			c.Servers[i].Close()
		}
	}
	// The grace runs from the server's start, inside Restart: measure from
	// before it, so a slow start (a busy CI machine) does not read as a
	// short grace.
	started = time.Now()
	s = c.Restart(victim)
	addr = s.ZKAddr()
	if r, ok := readOnlyConnect(addr, 0, nil); ok {
		t.Errorf("a read-only session %v after a restart with no leader: %+v", time.Since(started), r)
	}
	if got := fourLetter(t, addr, "isro"); got != "null" && time.Since(started) < grace {
		t.Errorf("isro %q %v after the restart", got, time.Since(started))
	}
	waitFourLetter(t, addr, "isro", "ro", grace+5*time.Second)
	if d := time.Since(started); d < grace-100*time.Millisecond {
		t.Errorf("read-only %v after the restart, before the grace of %v", d, grace)
	}
	if r, ok := readOnlyConnect(addr, 0, nil); !ok || !r.ReadOnly {
		t.Errorf("no read-only session after the grace: %+v %v", r, ok)
	}
}
