package server

import (
	"fmt"
	"testing"

	"coord/api"
	"coord/vocab"
)

// A client that has had no response yet re-attaches with last zxid 0 (a
// ZooKeeper client's lastZxidSeen before its first reply) and may land on a
// server restarted a moment ago, whose state is still behind the log it
// replays: the server catches up with the leader before it looks the session
// up, and takes it back instead of calling it expired.
func TestReattachToRestartedServerBehindTheLog(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	li := c.Leader()
	fi := (li + 1) % 3
	w := newSession(t, c.Servers[li].GRPCAddr())
	for i := range 500 { // a log for the restarted server to replay
		mustOK(t, w.create(fmt.Sprintf("/n%03d", i), "x", vocab.ModePersistent))
	}
	for round := range 5 {
		s := newSession(t, c.Servers[li].GRPCAddr())
		s.drop()
		srv := c.Restart(fi)
		r, err := dialSession(t, srv.GRPCAddr(), &api.ConnectRequest{SessionId: s.id, Password: s.pw, TimeoutMs: 10000})
		if err != nil {
			t.Fatalf("round %d: re-attaching session 0x%x with no zxid to the restarted %s: %v", round, s.id, srv.ID(), err)
		}
		if r.id != s.id {
			t.Fatalf("round %d: re-attached as 0x%x, want 0x%x", round, r.id, s.id)
		}
		r.drop()
	}
}
