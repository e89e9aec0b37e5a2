package server

import (
	"context"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// TestAddVoterByRaftAddressThenLead: a server added by its raft address
// alone (coordctl add-voter ID ADDR; no -peers, no gossip), then made
// leader (move-leader), leads a working cluster: the others forward writes
// to it on its peer plane and Members names its gRPC address, which the
// others learn from it (issue 27 item 4: before, no other server could open
// a session, "server: no leader", and coordctl could not find the leader).
func TestAddVoterByRaftAddressThenLead(t *testing.T) {
	c := NewTestClusterWith(t, 3, 0, func(cfg *Config) { onTCP(cfg); withAdmin(cfg) }) // s4 joins by its real address
	cfg := testConfig(t, "s4")
	withAdmin(&cfg)
	c.Start(cfg)
	s4 := c.Servers[3]
	leader := c.Servers[c.Leader()]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adminClient(t, leader.GRPCAddr()).AddServer(ctx, &api.AddServerRequest{Id: "s4", RaftAddr: s4.RaftAddr()}); err != nil {
		t.Fatalf("add-voter s4 by raft address: %v", err)
	}
	for s4.AppliedIndex() < leader.AppliedIndex() {
		if ctx.Err() != nil {
			t.Fatal("s4 did not catch up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := adminClient(t, leader.GRPCAddr()).TransferLeadership(ctx, &api.TransferLeadershipRequest{Id: "s4"}); err != nil {
		t.Fatalf("move-leader s4: %v", err)
	}
	for !s4.IsLeader() {
		if ctx.Err() != nil {
			t.Fatal("s4 never led")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var other *Server
	for _, s := range c.Servers[:3] {
		if !s.IsLeader() {
			other = s
		}
	}
	sess := newSession(t, other.GRPCAddr())
	mustOK(t, sess.create("/through-s4", "x", vocab.ModePersistent))
	// Members asks the others for an address it lacks, within 2 ×
	// RaftTimeout and at most once a second: on a loaded machine (CI once)
	// the first ask can run out, and a later call finds it.
	var s4m *api.Member
	for tries := 1; ; tries++ {
		resp, err := adminClient(t, other.GRPCAddr()).Members(ctx, &api.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		s4m = nil
		for _, m := range resp.Members {
			if m.Id == "s4" {
				s4m = m
			}
		}
		if s4m == nil {
			t.Fatalf("members on %s has no s4: %v", other.ID(), resp.Members)
		}
		if (s4m.Leader && s4m.GrpcAddr == s4.GRPCAddr()) || tries == 5 {
			t.Logf("members on %s after %d calls: s4 is %+v", other.ID(), tries, s4m)
			break
		}
		time.Sleep(time.Second)
	}
	if !s4m.Leader || s4m.GrpcAddr != s4.GRPCAddr() {
		t.Errorf("members on %s: s4 is %+v; want the leader at gRPC %s", other.ID(), s4m, s4.GRPCAddr())
	}
}
