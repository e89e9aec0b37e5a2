package server

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// A 3-voter + 1-observer cluster: writes through any server are visible on
// every server, the observer serves reads, and a sync makes a server current.
func TestClusterReplicates(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 1)
	sessions := make([]*rawSession, len(c.Servers))
	for i, srv := range c.Servers {
		sessions[i] = newSession(t, srv.GRPCAddr())
	}
	for i, s := range sessions {
		mustOK(t, s.create(fmt.Sprintf("/from-%d", i), fmt.Sprint(i), vocab.ModePersistent))
	}
	for i, s := range sessions {
		mustOK(t, s.sync())
		kids := mustOK(t, s.children("/", false)).GetGetChildren().Children
		if len(kids) != len(sessions)+1 {
			t.Fatalf("server %d sees %v", i, kids)
		}
		for j := range sessions {
			if g := mustOK(t, s.get(fmt.Sprintf("/from-%d", j), false)); string(g.GetGetData().Data) != fmt.Sprint(j) {
				t.Fatalf("server %d: /from-%d = %q", i, j, g.GetGetData().Data)
			}
		}
	}
	if role := c.Servers[3].Role(); role != "observer" {
		t.Fatalf("server 4 is %s", role)
	}
	// Every server holds the same state.
	c.WaitConverged()
}

// Kill the leader: a new one is elected, no acknowledged write is lost, and
// a session (with its ephemeral) survives and moves to another server.
func TestLeaderKill(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	follower := (li + 1) % 3
	owner := newSession(t, c.Servers[follower].GRPCAddr())
	mustOK(t, owner.create("/eph", "", vocab.ModeEphemeral))
	writer := newSession(t, c.Servers[li].GRPCAddr())
	acked := 0
	for i := 0; i < 50; i++ {
		mustOK(t, writer.create(fmt.Sprintf("/k%02d", i), "", vocab.ModePersistent))
		acked++
	}
	killed := c.Servers[li]
	killed.Close()
	start := time.Now()
	nl := c.Leader()
	t.Logf("new leader %s after %v", c.Servers[nl].ID(), time.Since(start))
	// The session moves to the server that is left over.
	other := 3 - li - follower
	moved, err := dialSession(t, c.Servers[other].GRPCAddr(), &api.ConnectRequest{SessionId: owner.id, Password: owner.pw, TimeoutMs: 10000, LastZxid: owner.lastZx})
	if err != nil {
		t.Fatalf("re-attaching: %v", err)
	}
	owner.drop()
	mustOK(t, moved.sync())
	for i := 0; i < acked; i++ {
		mustOK(t, moved.get(fmt.Sprintf("/k%02d", i), false))
	}
	st := mustOK(t, moved.get("/eph", false)).GetGetData().Stat
	if st.EphemeralOwner != owner.id {
		t.Fatalf("ephemeral owner %x, session %x", st.EphemeralOwner, owner.id)
	}
	// Writes work under the new leader.
	mustOK(t, moved.create("/after", "", vocab.ModePersistent))
}

// WaitConverged waits until every running server has applied the same index
// and holds the same state digest.
func (c *TestCluster) WaitConverged() {
	c.tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var digests [][32]byte
		var idx []uint64
		for _, s := range c.Servers {
			if s.isClosed() {
				continue
			}
			digests = append(digests, s.View().Digest())
			idx = append(idx, s.AppliedIndex())
		}
		same := true
		for i := range digests {
			same = same && digests[i] == digests[0] && idx[i] == idx[0]
		}
		if same {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.tb.Fatal("servers did not converge to one state")
}

// A session whose client stops heartbeating expires by the leader's
// decision: its ephemeral goes and the watches on it fire on every server.
// A session that keeps heartbeating through a leader change lives on.
func TestSessionExpiry(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	// The doomed session must outlive the set-up below (a sync and a read
	// on each server between its pings): 1 s, as 400 ms expired it there
	// once under CI's load with -race.
	doomed, err := dialSession(t, c.Servers[0].GRPCAddr(), &api.ConnectRequest{TimeoutMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if doomed.timeout != 1000 {
		t.Fatalf("negotiated %d ms", doomed.timeout)
	}
	mustOK(t, doomed.create("/doomed", "", vocab.ModeEphemeral))
	live, err := dialSession(t, c.Servers[1].GRPCAddr(), &api.ConnectRequest{TimeoutMs: 400})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, live.create("/live", "", vocab.ModeEphemeral))
	var watchers []*rawSession
	for _, srv := range c.Servers {
		w := newSession(t, srv.GRPCAddr())
		mustOK(t, w.sync())
		mustOK(t, w.get("/doomed", true))
		watchers = append(watchers, w)
		// Both sessions live until the watches are set (each step may
		// take a while on a busy machine: -race).
		mustOK(t, doomed.ping())
		mustOK(t, live.ping())
	}
	doomed.drop() // no close, no more pings

	// Keep the live session heartbeating while leadership moves, as a
	// client does: a server that loses its leader for a third of the
	// session's timeout closes the connection (leaderloss.go; a transfer
	// on a busy machine can take that long), and the client re-attaches
	// to a server of the cluster within the timeout.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// A failed send ends this goroutine (t.Fatal): it still reports,
		// or the test would wait for it forever.
		defer func() {
			select {
			case done <- errors.New("the pings stopped: a send failed"):
			default:
			}
		}()
		for n := 0; ; {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(80 * time.Millisecond):
			}
			r, err := live.tryRecv(live.send(&api.Request{Op: &api.Request_Ping{Ping: &api.Ping{}}}))
			if err == nil && r.Err != 0 {
				done <- fmt.Errorf("ping: %v", vocab.Code(r.Err))
				return
			}
			for err != nil {
				n++
				live.drop()
				if n > 20 {
					done <- fmt.Errorf("re-attaching the live session: %v", err)
					return
				}
				var back *rawSession
				back, err = dialSession(t, c.Servers[n%3].GRPCAddr(), &api.ConnectRequest{SessionId: live.id, Password: live.pw, TimeoutMs: 400, LastZxid: live.lastZx})
				if err == nil {
					live = back
				}
			}
		}
	}()
	for i, w := range watchers {
		ev := w.nextEvent(5 * time.Second)
		if ev.Path != "/doomed" || vocab.EventType(ev.Type) != vocab.EventNodeDeleted {
			t.Fatalf("watcher on server %d got %+v", i, ev)
		}
	}
	li := c.Leader()
	if _, err := (&adminService{s: c.Servers[li], peer: true}).TransferLeadership(t.Context(), &api.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	time.Sleep(1200 * time.Millisecond) // three timeouts under the new leader
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	v := c.Servers[c.Leader()].View()
	if _, ok := v.Session(live.id); !ok {
		t.Fatal("the heartbeating session expired")
	}
	if _, ok := v.Session(doomed.id); ok {
		t.Fatal("the silent session is still there")
	}
	if _, err := v.Exists("/live"); err != nil {
		t.Fatalf("/live: %v", err)
	}
}

// A follower restarted from its data directory catches up, from the log and,
// once the leader has compacted its log, from a snapshot.
func TestRestartFollowerCatchesUp(t *testing.T) {
	c := emptyCluster(t)
	for i := 0; i < 3; i++ {
		cfg := testConfig(t, fmt.Sprintf("s%d", i+1))
		cfg.SnapshotThreshold, cfg.TrailingLogs = 64, 16
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			first := c.Servers[0]
			cfg.Peers = []Peer{{ID: first.ID(), RaftAddr: first.RaftAddr(), GRPCAddr: first.GRPCAddr()}}
		}
		c.Start(cfg)
	}
	c.WaitMembers(3, 0)
	li := c.Leader()
	f := (li + 1) % 3
	s := newSession(t, c.Servers[li].GRPCAddr())
	// On a loaded machine leadership may move under the writes: a write
	// answered ConnectionLoss (its fate unknown) is retried on a new
	// session on a server that stays up, and NodeExists then means it had
	// taken effect.
	write := func(from, to int) {
		for i := from; i < to; i++ {
			p := fmt.Sprintf("/n%03d", i)
			for try := 0; ; try++ {
				r, err := s.tryDo(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: p, Data: []byte("x"),
					Mode: int32(vocab.ModePersistent), Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}})
				if err == nil && (r.Err == 0 || try > 0 && vocab.Code(r.Err) == vocab.NodeExists) {
					break
				}
				if try == 5 || err == nil && vocab.Code(r.Err) != vocab.ConnectionLoss {
					t.Fatalf("create %s: %v %v", p, err, r)
				}
				t.Logf("create %s: %v %v; again on a new session", p, err, r)
				s.drop()
				to := c.Leader()
				if to == f {
					to = (f + 1) % 3
				}
				s = newSession(t, c.Servers[to].GRPCAddr())
			}
		}
	}
	write(0, 20)
	c.WaitConverged()

	// Down for a few writes: back from the log.
	c.Servers[f].Close()
	write(20, 30)
	c.Restart(f)
	c.WaitConverged()

	// Down while the leader snapshots and compacts: back from a snapshot.
	c.Servers[f].Close()
	write(30, 300)
	if _, err := c.Servers[li].rep.TakeSnapshot(); err != nil {
		t.Fatalf("leader snapshot: %v", err)
	}
	first, _ := c.Servers[li].rep.FirstIndex()
	c.Restart(f)
	c.WaitConverged()
	if first <= c.Servers[f].AppliedIndex()-270 {
		t.Logf("leader log starts at %d", first)
	}
	if n := c.Servers[f].View().NodeCount(); n != 4+300 {
		t.Fatalf("restarted follower holds %d znodes", n)
	}
}

// A client sees a watch event before any response that shows the change,
// and a pipelined session's requests take effect in order.
func TestWatchOrderingAndFIFO(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	reader := newSession(t, c.Servers[(li+1)%3].GRPCAddr())
	writer := newSession(t, c.Servers[li].GRPCAddr())
	mustOK(t, writer.create("/w", "0", vocab.ModePersistent))
	mustOK(t, reader.sync())
	const rounds = 200
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := 1; i <= rounds; i++ {
			// A leader change on a loaded machine may fail a write (and
			// close the connection): the writer then stops, and so does
			// the reader below, with what it has seen.
			r, err := writer.tryDo(&api.Request{Op: &api.Request_SetData{SetData: &api.SetDataRequest{Path: "/w", Data: []byte(fmt.Sprint(i)), Version: -1}}})
			if err != nil || r.Err != 0 {
				t.Logf("writer stopped at %d: %v %v", i, err, r)
				return
			}
		}
	}()
	// The writer uses its stream until it is done; the test's cleanup would
	// cut it off.
	defer func() { <-writerDone }()
	// Register a watch with a read, then read until the data changes: the
	// change's event must come before the response that shows it.
	changes := 0
	for changes < 20 {
		// The last watch fired once and is gone: an event arriving before
		// the registering read's answer would be the new watch's, fired
		// ahead of the response that set it.
		reader.events = reader.events[:0]
		reg := mustOK(t, reader.get("/w", true)).GetGetData().Data
		if len(reader.events) != 0 {
			t.Fatalf("event %+v arrived before the read (%q) that set its watch", reader.events[0], reg)
		}
		writerStopped := false
		for {
			// Whether the writer is done is read before the data: a
			// writer done and data unchanged means no change is coming.
			select {
			case <-writerDone:
				writerStopped = true
			default:
			}
			r := mustOK(t, reader.get("/w", false))
			if string(r.GetGetData().Data) == string(reg) {
				if string(reg) == fmt.Sprint(rounds) || writerStopped {
					break
				}
				continue
			}
			if len(reader.events) == 0 {
				t.Fatalf("read %q (watch set at %q) before its event", r.GetGetData().Data, reg)
			}
			if ev := reader.events[0]; ev.Path != "/w" || vocab.EventType(ev.Type) != vocab.EventNodeDataChanged {
				t.Fatalf("event %+v", ev)
			}
			changes++
			break
		}
		if string(reg) == fmt.Sprint(rounds) || writerStopped {
			break
		}
	}
	if changes == 0 {
		select {
		case <-writerDone:
			t.Log("the writer stopped before the reader saw a change")
		default:
			t.Fatal("saw no change at all")
		}
	}

	// FIFO: pipelined creates and reads answer in order and each read sees
	// the writes sent before it. A leader change on a loaded machine
	// (-race) may close the connection: every answer after the loss is
	// then a connection loss (none OK), and the check runs again on a new
	// session.
	for attempt, s := 0, reader; ; attempt++ {
		var xids []int64
		for i := 0; i < 100; i++ {
			path := fmt.Sprintf("/f%d-%03d", attempt, i)
			xids = append(xids, s.send(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{
				Path: path, Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}}))
			xids = append(xids, s.send(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: path}}}))
		}
		lost := false
		for _, x := range xids {
			r, err := s.tryRecv(x)
			switch {
			case err != nil:
				lost = true
			case lost || vocab.Code(r.Err) == vocab.ConnectionLoss:
				if vocab.Code(r.Err) != vocab.ConnectionLoss {
					t.Fatalf("xid %d answered %v after a connection loss", x, vocab.Code(r.Err))
				}
				lost = true
			default:
				mustOK(t, r)
			}
			if err != nil {
				break
			}
		}
		if !lost {
			break
		}
		if attempt == 2 {
			t.Fatal("three sessions lost their connection during the FIFO check")
		}
		t.Logf("the connection was lost during the FIFO check (a leader change); again on a new session")
		s = newSession(t, c.Servers[c.Leader()].GRPCAddr())
	}
}

// Membership: add an observer and a fourth voter, remove a server, and
// transfer leadership.
func TestMembershipChanges(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	c.Add(true)
	c.WaitMembers(3, 1)
	c.Add(false)
	c.WaitMembers(4, 1)
	s := newSession(t, c.Servers[3].GRPCAddr()) // the observer
	mustOK(t, s.create("/via-observer", "", vocab.ModePersistent))
	li := c.Leader()
	victim := (li + 1) % 3
	admin := &adminService{s: c.Servers[li], peer: true}
	if _, err := admin.RemoveServer(t.Context(), &api.RemoveServerRequest{Id: c.Servers[victim].ID()}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	c.Servers[victim].Close()
	c.WaitMembers(3, 1)
	resp, err := admin.TransferLeadership(t.Context(), &api.TransferLeadershipRequest{})
	if err != nil {
		t.Fatalf("transfer: %v", err)
	}
	if resp.LeaderId == c.Servers[li].ID() || resp.LeaderId == "" {
		t.Fatalf("leader after transfer: %q", resp.LeaderId)
	}
	// A server that still forwards to the old leader answers ConnectionLoss
	// and drops the connection, as ZooKeeper does on a leader change; the
	// client re-attaches and goes on.
	for try := 0; ; try++ {
		r := s.create("/after-transfer", "", vocab.ModePersistent)
		if r.Err == 0 {
			break
		}
		if vocab.Code(r.Err) != vocab.ConnectionLoss || try == 20 {
			t.Fatalf("create after transfer: %v", vocab.Code(r.Err))
		}
		time.Sleep(50 * time.Millisecond)
		// While the observer still learns of the new leader, the re-attach
		// itself may be refused (not the leader): try again.
		re, err := dialSession(t, c.Servers[3].GRPCAddr(), &api.ConnectRequest{SessionId: s.id, Password: s.pw, TimeoutMs: 10000, LastZxid: s.lastZx})
		for a := 0; err != nil; a++ {
			if a == 20 {
				t.Fatalf("re-attach: %v", err)
			}
			t.Logf("re-attach: %v; again", err)
			time.Sleep(100 * time.Millisecond)
			re, err = dialSession(t, c.Servers[3].GRPCAddr(), &api.ConnectRequest{SessionId: s.id, Password: s.pw, TimeoutMs: 10000, LastZxid: s.lastZx})
		}
		s = re
	}
	c.WaitConverged()
}

// Followers apply a write as soon as the leader has applied it, without
// waiting for raft to tell them of the commit (here raft would take its
// 200 ms commit timeout): a follower that forwarded the write learns from
// the leader's answer, every follower from its Commits stream. Raft's later
// apply of the same entries changes nothing.
func TestFollowersApplyCommitsAtOnce(t *testing.T) {
	c := emptyCluster(t)
	for i := 0; i < 3; i++ {
		cfg := testConfig(t, fmt.Sprintf("s%d", i+1))
		cfg.CommitTimeout = cfg.RaftTimeout
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			first := c.Servers[0]
			cfg.Peers = []Peer{{ID: first.ID(), RaftAddr: first.RaftAddr(), GRPCAddr: first.GRPCAddr()}}
		}
		c.Start(cfg)
	}
	c.WaitMembers(3, 0)
	li := c.Leader()
	f1, f2 := c.Servers[(li+1)%3], c.Servers[(li+2)%3]
	c.WaitConverged()

	// Writes on the leader reach both followers through their streams.
	ls := newSession(t, c.Servers[li].GRPCAddr())
	mustOK(t, ls.create("/fast", "0", vocab.ModePersistent))
	before1, before2 := f1.rep.Stats().FastApplied, f2.rep.Stats().FastApplied
	for i := 1; i <= 10; i++ {
		mustOK(t, ls.set("/fast", fmt.Sprint(i)))
	}
	c.WaitConverged()
	if f1.rep.Stats().FastApplied == before1 || f2.rep.Stats().FastApplied == before2 {
		t.Fatalf("followers applied %d and %d of the leader's writes before raft reported their commit",
			f1.rep.Stats().FastApplied-before1, f2.rep.Stats().FastApplied-before2)
	}

	// A follower's own writes apply there before raft reports them.
	fs := newSession(t, f1.GRPCAddr())
	before1 = f1.rep.Stats().FastApplied
	for i := 11; i <= 30; i++ {
		mustOK(t, fs.set("/fast", fmt.Sprint(i)))
	}
	if f1.rep.Stats().FastApplied == before1 {
		t.Fatal("the follower applied none of its forwarded writes before raft reported their commit")
	}
	c.WaitConverged()
	for _, srv := range c.Servers {
		if data, _, err := srv.View().GetData("/fast", nil); err != nil || string(data) != "30" {
			t.Fatalf("%s holds %q (%v)", srv.ID(), data, err)
		}
	}
}

// Every follower hears of each commit on its notice connection to the
// leader (the peer plane's channel 'C'), and with FreshFollowers a read on
// a follower right after a write on the leader was acknowledged shows the
// write: the leader answered only after the follower confirmed the notice,
// and the follower's read waited for it. How many first reads were fresh
// is reported; that none was stale is asserted only where no follower fell
// behind (ran late by more than the 1 ms the leader waits).
func TestCommitNotices(t *testing.T) {
	t.Parallel()
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { cfg.FreshFollowers = fresh })
			li := c.Leader()
			f1, f2 := c.Servers[(li+1)%3], c.Servers[(li+2)%3]
			c.WaitConverged()
			ls := newSession(t, c.Servers[li].GRPCAddr())
			rs := newSession(t, f1.GRPCAddr())
			mustOK(t, ls.create("/notice", "0", vocab.ModePersistent))
			// The followers dial the leader's notices when raft names it;
			// write until both read one (their connections are up).
			for deadline := time.Now().Add(5 * time.Second); f1.rep.Stats().NoticesRead == 0 || f2.rep.Stats().NoticesRead == 0; {
				if time.Now().After(deadline) {
					t.Fatalf("no commit notices on a follower after 5 s of writes")
				}
				mustOK(t, ls.set("/notice", "0"))
			}
			n1, n2 := f1.rep.Stats().NoticesRead, f2.rep.Stats().NoticesRead
			const writes = 100
			fresh1 := 0
			for i := 1; i <= writes; i++ {
				mustOK(t, ls.set("/notice", fmt.Sprint(i)))
				if r := rs.get("/notice", false); r.Err == 0 && string(r.GetGetData().GetData()) == fmt.Sprint(i) {
					fresh1++
				}
			}
			t.Logf("fresh=%v: %d of %d first reads on a follower showed the write just acknowledged on the leader", fresh, fresh1, writes)
			c.WaitConverged()
			if d1, d2 := f1.rep.Stats().NoticesRead-n1, f2.rep.Stats().NoticesRead-n2; d1 == 0 || d2 == 0 {
				t.Fatalf("the followers read %d and %d commit notices for %d writes", d1, d2, writes)
			}
			if fresh && fresh1 == 0 {
				t.Fatalf("with FreshFollowers no first read of %d showed the write", writes)
			}
		})
	}
}

// A server an operator removes stays out while it keeps running: it does
// not ask to join again, and no leader (the same or a new one, which knows
// its addresses) adds it back; the operator can.
func TestRemovedServerStaysOut(t *testing.T) {
	t.Parallel()
	c, victim := removeAFollowerAndHandOver(t)
	// Ten reconcile rounds and join attempts' worth of time.
	time.Sleep(10 * c.Configs[0].RaftTimeout)
	c.WaitMembers(2, 0)
	nl := c.Leader()
	if nl == victim {
		t.Fatal("the removed server leads")
	}
	admin := &adminService{s: c.Servers[nl], peer: true}
	if _, err := admin.AddServer(t.Context(), &api.AddServerRequest{Id: c.Servers[victim].ID(), RaftAddr: c.Servers[victim].RaftAddr()}); err != nil {
		t.Fatalf("add back: %v", err)
	}
	c.WaitMembers(3, 0)
}

// removeAFollowerAndHandOver starts 3 servers, has the leader remove a
// follower (returned), and hands leadership to the other one, which did
// not remove it.
func removeAFollowerAndHandOver(t *testing.T) (*TestCluster, int) {
	c := NewTestCluster(t, 3, 0)
	// The servers' own join requests from their start (each may wait on
	// a forward for up to 2 × RaftTimeout) are done before the removal, as
	// they are long done when an operator removes a server.
	time.Sleep(5 * c.Configs[0].RaftTimeout)
	li := c.Leader()
	victim := (li + 1) % 3
	admin := &adminService{s: c.Servers[li], peer: true}
	if _, err := admin.RemoveServer(t.Context(), &api.RemoveServerRequest{Id: c.Servers[victim].ID()}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	c.WaitMembers(2, 0)
	if _, err := admin.TransferLeadership(t.Context(), &api.TransferLeadershipRequest{}); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	return c, victim
}

// A removed server that restarts from its data directory stays out too,
// even when the leader that removed it (and would refuse its join) no
// longer leads: it holds raft state from a configuration it is no longer
// in, which only an operator's removal leaves.
func TestRemovedServerStaysOutAfterRestart(t *testing.T) {
	t.Parallel()
	c, victim := removeAFollowerAndHandOver(t)
	c.Restart(victim)
	time.Sleep(10 * c.Configs[0].RaftTimeout)
	nl := c.Leader()
	admin := &adminService{s: c.Servers[nl], peer: true}
	servers, err := c.Servers[nl].rep.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 {
		t.Fatalf("after its restart the removed %s is back in the configuration: %v", c.Servers[victim].ID(), servers)
	}
	if !c.Servers[victim].removed.Load() {
		t.Fatalf("the restarted %s does not know it was removed", c.Servers[victim].ID())
	}
	if _, err := admin.AddServer(t.Context(), &api.AddServerRequest{Id: c.Servers[victim].ID(), RaftAddr: c.Servers[victim].RaftAddr()}); err != nil {
		t.Fatalf("add back: %v", err)
	}
	c.WaitMembers(3, 0)
}
