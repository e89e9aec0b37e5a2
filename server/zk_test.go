package server

import (
	"errors"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// A smoke test of the ZooKeeper front end with a real client we did not
// write (go-zookeeper); the full suite lives in zk tests of its own.
func TestZooKeeperProtocolSmoke(t *testing.T) {
	t.Parallel()
	c := NewTestCluster(t, 1, 0)
	conn, events, err := gozk.Connect(c.ZKAddrs(), 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.After(5 * time.Second)
	for conn.State() != gozk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("no session: %v", conn.State())
		}
	}
	acl := gozk.WorldACL(gozk.PermAll)
	if p, err := conn.Create("/a", []byte("x"), 0, acl); err != nil || p != "/a" {
		t.Fatalf("create: %q %v", p, err)
	}
	if _, err := conn.Create("/a", nil, 0, acl); !errors.Is(err, gozk.ErrNodeExists) {
		t.Fatalf("create twice: %v", err)
	}
	data, st, err := conn.Get("/a")
	if err != nil || string(data) != "x" || st.Version != 0 {
		t.Fatalf("get: %q %+v %v", data, st, err)
	}
	_, _, ch, err := conn.GetW("/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Set("/a", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-ch:
		if ev.Type != gozk.EventNodeDataChanged || ev.Path != "/a" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
	seq, err := conn.Create("/a/s-", nil, gozk.FlagEphemeral|gozk.FlagSequence, acl)
	if err != nil || seq != "/a/s-0000000000" {
		t.Fatalf("sequential: %q %v", seq, err)
	}
	kids, _, err := conn.Children("/a")
	if err != nil || len(kids) != 1 {
		t.Fatalf("children %v %v", kids, err)
	}
	res, err := conn.Multi(&gozk.CreateRequest{Path: "/m", Acl: acl}, &gozk.SetDataRequest{Path: "/nope", Version: -1})
	if !errors.Is(err, gozk.ErrNoNode) || len(res) != 2 {
		t.Fatalf("failed multi: %v %v", res, err)
	}
	if ok, _, _ := conn.Exists("/m"); ok {
		t.Fatal("rolled-back multi left /m")
	}
	if _, err := conn.Multi(&gozk.CreateRequest{Path: "/m", Acl: acl}, &gozk.SetDataRequest{Path: "/a", Version: -1}); err != nil {
		t.Fatalf("multi: %v", err)
	}
	if err := conn.Delete("/a", 0); !errors.Is(err, gozk.ErrBadVersion) {
		t.Fatalf("delete with a stale version: %v", err)
	}
}
