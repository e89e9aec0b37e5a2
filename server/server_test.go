package server

import (
	"coord/vocab"
	"testing"
)

func TestSingleNodeCRUD(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	s := newSession(t, c.Servers[0].GRPCAddr())
	r := mustOK(t, s.create("/a", "hello", vocab.ModePersistent))
	if r.GetCreate().Path != "/a" {
		t.Fatalf("created %q", r.GetCreate().Path)
	}
	g := mustOK(t, s.get("/a", false))
	if string(g.GetGetData().Data) != "hello" || g.GetGetData().Stat.Czxid != r.Zxid {
		t.Fatalf("get: %v (create zxid %x)", g, r.Zxid)
	}
	mustOK(t, s.set("/a", "world"))
	if g := mustOK(t, s.get("/a", false)); string(g.GetGetData().Data) != "world" || g.GetGetData().Stat.Version != 1 {
		t.Fatalf("after set: %v", g)
	}
	if r := s.create("/a", "", vocab.ModePersistent); vocab.Code(r.Err) != vocab.NodeExists {
		t.Fatalf("second create: %v", r)
	}
	seq := mustOK(t, s.create("/a/s-", "", vocab.ModeEphemeralSequential))
	if seq.GetCreate().Path != "/a/s-0000000000" {
		t.Fatalf("sequential: %q", seq.GetCreate().Path)
	}
	kids := mustOK(t, s.children("/a", false)).GetGetChildren().Children
	if len(kids) != 1 || kids[0] != "s-0000000000" {
		t.Fatalf("children %v", kids)
	}
	mustOK(t, s.sync())
}
