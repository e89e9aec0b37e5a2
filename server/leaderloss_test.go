package server

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"coord/api"
	"coord/internal/fourletter"
	"coord/vocab"
)

// Issue 13: a server cut off from the quorum drops its clients before the
// majority can expire their sessions.

// pinger keeps a session busy (a ping every 50 ms, as a client heartbeats)
// and records when the server last answered and when the stream ended.
type pinger struct {
	mu       sync.Mutex
	last     time.Time // the last answer
	ended    time.Time // when the server ended the stream
	endedErr error
	done     chan struct{}
}

func startPinger(s *rawSession) *pinger {
	p := &pinger{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			_, err := s.tryDo(&api.Request{Op: &api.Request_Ping{Ping: &api.Ping{}}})
			now := time.Now()
			p.mu.Lock()
			if err != nil {
				p.ended, p.endedErr = now, err
				p.mu.Unlock()
				return
			}
			p.last = now
			p.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return p
}

func (p *pinger) wait(t *testing.T, d time.Duration) (last, ended time.Time, err error) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("the isolated server still answered the session after %v", d)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last, p.ended, p.endedErr
}

// watchDeleted sets an exists watch on path through s and returns a
// channel that gets the time the NodeDeleted event arrived.
func watchDeleted(t *testing.T, s *rawSession, path string) <-chan time.Time {
	t.Helper()
	mustOK(t, s.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: path, Watch: true}}}))
	ch := make(chan time.Time, 1)
	go func() {
		msg, err := s.recvMsg(30 * time.Second)
		if err == nil && msg.GetEvent().GetType() == int32(vocab.EventNodeDeleted) && msg.GetEvent().GetPath() == path {
			ch <- time.Now()
		}
		close(ch)
	}()
	return ch
}

func checkIsolation(t *testing.T, isolateLeader bool) {
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	victim := (li + 1) % 3
	if isolateLeader {
		victim = li
	}
	majority := []int{(victim + 1) % 3, (victim + 2) % 3}
	const timeout = 3000 // ms: the bound is 1 s (LeaderLossFraction 1/3)
	addr := c.Servers[victim].GRPCAddr()

	// holder keeps its lock node but will not find another server;
	// mover re-attaches elsewhere as soon as it is dropped.
	holder, err := dialSession(t, addr, &api.ConnectRequest{TimeoutMs: timeout})
	if err != nil {
		t.Fatal(err)
	}
	mover, err := dialSession(t, addr, &api.ConnectRequest{TimeoutMs: timeout})
	if err != nil {
		t.Fatal(err)
	}
	mustOK(t, holder.create("/holder", "", vocab.ModeEphemeral))
	mustOK(t, mover.create("/mover", "", vocab.ModeEphemeral))
	watcher := newSession(t, c.Servers[majority[0]].GRPCAddr())
	c.WaitConverged()
	deleted := watchDeleted(t, watcher, "/holder")

	hp, mp := startPinger(holder), startPinger(mover)
	time.Sleep(200 * time.Millisecond)
	isolated := time.Now()
	c.Isolate(victim)
	t.Cleanup(func() { c.Heal(victim) })

	// The mover is dropped within the bound and re-attaches to the
	// majority with its session and ephemeral intact.
	_, moverEnded, moverErr := mp.wait(t, 10*time.Second)
	if status.Code(moverErr) != codes.Unavailable || !strings.Contains(moverErr.Error(), "no contact with a leader") {
		t.Errorf("the mover's stream ended with %v, want Unavailable naming the lost leader", moverErr)
	}
	moved, err := dialRetry(t, c.Servers[majority[1]].GRPCAddr(), &api.ConnectRequest{SessionId: mover.id, Password: mover.pw,
		TimeoutMs: timeout, LastZxid: mover.lastZx})
	if err != nil || moved.id != mover.id {
		t.Fatalf("the mover could not re-attach to the majority: %v", err)
	}
	st := mustOK(t, moved.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: "/mover"}}})).GetStat().GetStat()
	if st.GetEphemeralOwner() != mover.id {
		t.Fatalf("the mover's ephemeral after re-attaching: %v", st)
	}
	movedPinger := startPinger(moved)

	// The holder is dropped too, and its last answer and the drop both
	// come before the majority deletes its ephemeral.
	holderLast, holderEnded, _ := hp.wait(t, 10*time.Second)
	var gone time.Time
	select {
	case gone = <-deleted:
	case <-time.After(20 * time.Second):
		t.Fatal("the majority never deleted the holder's ephemeral")
	}
	if gone.IsZero() {
		t.Fatal("the watch on the holder's ephemeral ended without NodeDeleted")
	}
	rel := func(at time.Time) time.Duration { return at.Sub(isolated).Round(time.Millisecond) }
	t.Logf("isolated %s: mover dropped at %v; holder dropped at %v (last answer %v); the majority deleted the holder's ephemeral at %v",
		map[bool]string{false: "follower", true: "leader"}[isolateLeader], rel(moverEnded), rel(holderEnded), rel(holderLast), rel(gone))
	if !holderEnded.Before(gone) || !holderLast.Before(gone) {
		t.Fatalf("the isolated server answered the holder until %v and dropped it at %v, after the majority deleted its ephemeral at %v",
			rel(holderLast), rel(holderEnded), rel(gone))
	}
	// Not at the first missed heartbeat: an election's worth of silence
	// drops no one.
	if d := holderEnded.Sub(isolated); d < 700*time.Millisecond {
		t.Errorf("the holder was dropped %v after the isolation, before its bound (1 s)", d)
	}
	// And not late: its bound (1 s) plus, for a leader, its lease.
	if d := holderEnded.Sub(isolated); d > 2500*time.Millisecond {
		t.Errorf("the holder was dropped only %v after the isolation", d)
	}

	// While cut off, the server says so and takes no session.
	v := c.Servers[victim]
	if v.Serving() {
		t.Error("the isolated server says it is serving")
	}
	if out := fourLetter(t, v.ZKAddr(), "srvr"); out != "This ZooKeeper instance is not currently serving requests\n" {
		t.Errorf("srvr on the isolated server: %q", out)
	}
	if out := fourLetter(t, v.ZKAddr(), "ruok"); out != "imok" {
		t.Errorf("ruok on the isolated server: %q", out)
	}
	if _, err := dialSession(t, v.GRPCAddr(), &api.ConnectRequest{TimeoutMs: timeout}); status.Code(err) != codes.Unavailable {
		t.Errorf("a new session on the isolated server: %v, want Unavailable", err)
	}
	if n := testutil.ToFloat64(v.metrics.leaderLossDrops); n < 2 {
		t.Errorf("coord_server_leader_loss_disconnects_total = %v, want >= 2", n)
	}

	// Healed, it serves again and catches up.
	c.Heal(victim)
	deadline := time.Now().Add(10 * time.Second)
	for !v.Serving() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !v.Serving() {
		t.Fatal("the healed server does not serve again")
	}
	again := newSessionOK(t, v.GRPCAddr())
	if r := again.get("/holder", false); vocab.Code(r.Err) != vocab.NoNode {
		t.Fatalf("the healed server still shows the holder's ephemeral: %v", r)
	}
	mustOK(t, again.sync())
	if r := again.do(&api.Request{Op: &api.Request_Exists{Exists: &api.ExistsRequest{Path: "/mover"}}}); r.Err != 0 {
		t.Fatalf("the mover's ephemeral, seen from the healed server: %v", r)
	}
	c.WaitConverged()
	moved.drop()
	<-movedPinger.done
}

func TestIsolatedFollowerDropsItsClientsFirst(t *testing.T) { checkIsolation(t, false) }

func TestIsolatedLeaderDropsItsClientsFirst(t *testing.T) { checkIsolation(t, true) }

// fourLetter sends a four-letter word to a ZooKeeper port and returns the
// answer.
func fourLetter(t *testing.T, addr, cmd string) string {
	t.Helper()
	out, err := fourletter.Ask(context.Background(), addr, cmd, fourletter.Options{DialTimeout: 5 * time.Second, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return out
}

// An ordinary election (a leadership transfer) drops no session and no
// server stops serving for long enough to drop one.
func TestElectionDropsNoOne(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	var ps []*pinger
	for i := range c.Servers {
		s, err := dialSession(t, c.Servers[i].GRPCAddr(), &api.ConnectRequest{TimeoutMs: 3000})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, startPinger(s))
	}
	for round := 0; round < 3; round++ {
		if err := c.Servers[li].rep.TransferLeadership(t.Context(), ""); err != nil {
			t.Fatalf("leadership transfer: %v", err)
		}
		for c.Leader() == li {
			time.Sleep(10 * time.Millisecond)
		}
		li = c.Leader()
		time.Sleep(300 * time.Millisecond)
	}
	for i, p := range ps {
		select {
		case <-p.done:
			t.Fatalf("the session on %s was dropped during elections: %v", c.Servers[i].ID(), p.endedErr)
		default:
		}
	}
	for _, s := range c.Servers {
		if n := testutil.ToFloat64(s.metrics.leaderLossDrops); n != 0 {
			t.Errorf("%s dropped %v connections", s.ID(), n)
		}
	}
}

// The loop reads the contact age, then lists the connections: one made in
// between (the server became leader, or heard from one, meanwhile) is not
// closed on the stale age. CI once saw a one-server cluster close the
// session a test had just opened.
func TestLeaderLossStaleAgeDropsNoNewSession(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	srv := c.Servers[0]
	s := newSession(t, srv.GRPCAddr())
	mustOK(t, s.create("/before", "", vocab.ModePersistent))
	// The age as the loop read it before the election: no leader ever.
	srv.dropUnserved(math.MaxInt64, slog.Duration("since_start", 0))
	mustOK(t, s.create("/after", "", vocab.ModePersistent))
}
