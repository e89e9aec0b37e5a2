package server

import (
	"fmt"
	"testing"
	"time"

	"coord/api"
	"coord/fsm"
)

// Servers that know only one member's gossip address join the cluster: the
// leader learns of them through memberlist and adds them (voters promoted
// once caught up, observers as non-voters), and gossip tells who is alive.
func TestGossipJoin(t *testing.T) {
	c := &TestCluster{tb: t}
	cfg := TestConfig(t, "s1")
	cfg.Bootstrap = true
	cfg.GossipAddr = "127.0.0.1:0"
	first := c.start(cfg)
	for i := 2; i <= 4; i++ {
		cfg := TestConfig(t, fmt.Sprintf("s%d", i))
		cfg.GossipAddr = "127.0.0.1:0"
		cfg.GossipJoin = []string{first.GossipAddr()}
		cfg.Observer = i == 4
		c.start(cfg)
	}
	c.WaitMembers(3, 1)
	s := newSession(t, c.Servers[2].GRPCAddr())
	mustOK(t, s.create("/joined", "", fsm.ModePersistent))

	admin := &adminService{s: c.Servers[c.Leader()]}
	alive := func() map[string]bool {
		resp, err := admin.Members(t.Context(), &api.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, m := range resp.Members {
			out[m.Id] = m.Alive
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for a := alive(); len(a) != 4 || !a["s1"] || !a["s2"] || !a["s3"] || !a["s4"]; a = alive() {
		if time.Now().After(deadline) {
			t.Fatalf("members %v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
	victim := c.Servers[3]
	if c.Leader() == 3 {
		t.Skip("the observer cannot lead")
	}
	victim.Close()
	for a := alive(); a["s4"]; a = alive() {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("s4 still alive after it stopped: %v", a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
