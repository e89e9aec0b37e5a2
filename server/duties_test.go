package server

import (
	"testing"
	"time"

	"coord/api"
	"coord/vocab"
)

// The leader removes an emptied container and a lapsed TTL node through the
// log, so every server sees them go; a container that never had a child and
// a TTL node that still has one stay.
func TestLeaderRemovesContainersAndTTLNodes(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 3, 0)
	s := newSession(t, c.Servers[(c.Leader()+1)%3].GRPCAddr())
	mustOK(t, s.create("/ctr", "", vocab.ModeContainer))
	mustOK(t, s.create("/ctr/child", "", vocab.ModePersistent))
	mustOK(t, s.create("/unused", "", vocab.ModeContainer))
	ttl := func(path string) {
		t.Helper()
		mustOK(t, s.do(&api.Request{Op: &api.Request_Create{Create: &api.CreateRequest{Path: path, Mode: int32(vocab.ModePersistentTTL), Ttl: 300,
			Acl: []*api.ACL{{Perms: int32(vocab.PermAll), Id: &api.Id{Scheme: "world", Id: "anyone"}}}}}}))
	}
	ttl("/ttl")
	ttl("/ttl-parent")
	mustOK(t, s.create("/ttl-parent/kid", "", vocab.ModePersistent))
	mustOK(t, s.do(&api.Request{Op: &api.Request_Delete{Delete: &api.DeleteRequest{Path: "/ctr/child", Version: -1}}}))

	deadline := time.Now().Add(10 * time.Second)
	for {
		v := c.Servers[0].View()
		_, errC := v.Exists("/ctr")
		_, errT := v.Exists("/ttl")
		if errC != nil && errT != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container gone: %v, ttl node gone: %v", errC != nil, errT != nil)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.WaitConverged()
	for _, srv := range c.Servers {
		v := srv.View()
		for _, p := range []string{"/unused", "/ttl-parent"} {
			if _, err := v.Exists(p); err != nil {
				t.Fatalf("%s on %s: %v", p, srv.ID(), err)
			}
		}
	}
}
