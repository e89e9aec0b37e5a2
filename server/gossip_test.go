package server

import (
	"fmt"
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// Servers that know only one member's gossip address join the cluster: the
// leader learns of them through memberlist and adds them (voters promoted
// once caught up, observers as non-voters), and gossip tells who is alive.
func TestGossipJoin(t *testing.T) {
	c := emptyCluster(t)
	cfg := testConfig(t, "s1")
	cfg.Bootstrap = true
	cfg.GossipAddr = "127.0.0.1:0"
	first := c.Start(cfg)
	for i := 2; i <= 4; i++ {
		cfg := testConfig(t, fmt.Sprintf("s%d", i))
		cfg.GossipAddr = "127.0.0.1:0"
		cfg.GossipJoin = []string{first.GossipAddr()}
		cfg.Observer = i == 4
		c.Start(cfg)
	}
	c.WaitMembers(3, 1)
	s := newSession(t, c.Servers[2].GRPCAddr())
	mustOK(t, s.create("/joined", "", vocab.ModePersistent))

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

// With -gossip-key the servers' gossip is encrypted: a server with the key
// joins through gossip; one with another key is not heard.
func TestGossipKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	c := emptyCluster(t)
	cfg := testConfig(t, "s1")
	cfg.Bootstrap, cfg.GossipAddr, cfg.GossipKey = true, "127.0.0.1:0", key
	first := c.Start(cfg)
	cfg = testConfig(t, "s2")
	cfg.GossipAddr, cfg.GossipKey, cfg.GossipJoin = "127.0.0.1:0", key, []string{first.GossipAddr()}
	c.Start(cfg)
	c.WaitMembers(2, 0)

	stranger := testConfig(t, "s3")
	stranger.GossipAddr, stranger.GossipKey = "127.0.0.1:0", []byte("fedcba9876543210")
	stranger.GossipJoin = []string{first.GossipAddr()}
	s, err := New(stranger)
	if err == nil {
		// memberlist refuses the join at start (the push/pull fails) or
		// the server starts alone; either way it must not get in.
		t.Cleanup(func() { s.Close() })
		time.Sleep(2 * time.Second) // it would have joined by now: s2 took well under a second
	}
	c.WaitMembers(2, 0)
}
