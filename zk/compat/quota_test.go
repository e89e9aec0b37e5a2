package compat

import (
	"testing"

	"github.com/go-zookeeper/zk"
)

// Quota statistics: with a zookeeper_limits node under /zookeeper/quota/P,
// the server keeps /zookeeper/quota/P/zookeeper_stats at "count=N,bytes=M"
// for P's subtree (P included), counted when the stats node is created and
// then on every create, delete and setData below the deepest such P, as
// zkCli.sh's setquota and listquota use them; the stats node's Stat other
// than its data length does not change. Neither server enforces the limits.
func TestQuotaStats(t *testing.T) {
	cl := newCluster(t, 1)
	c := connect(t, "c", cl.Addrs(), clientOpts{})
	stats := func(p string) string {
		t.Helper()
		d, _, err := c.Get("/zookeeper/quota" + p + "/zookeeper_stats")
		must(t, "get stats of "+p, err)
		return string(d)
	}
	want := func(what, p, w string) {
		t.Helper()
		if got := stats(p); got != w {
			t.Errorf("%s: stats of %s = %q, want %q", what, p, got, w)
		}
	}

	c.create("/q", "abc", 0)
	c.create("/q/a", "12345", 0)
	// What setquota -n 3 /q does.
	c.create("/zookeeper/quota/q", "", 0)
	c.create("/zookeeper/quota/q/zookeeper_limits", "count=3,bytes=-1", 0)
	p, err := c.Create("/zookeeper/quota/q/zookeeper_stats", []byte("count=0,bytes=0"), 0, zk.WorldACL(zk.PermAll))
	must(t, "create stats", err)
	if p != "/zookeeper/quota/q/zookeeper_stats" {
		t.Fatalf("stats path %q", p)
	}
	want("after setquota", "/q", "count=2,bytes=8")
	st0 := c.stat("/zookeeper/quota/q/zookeeper_stats")

	c.create("/q/b", "xy", 0)
	want("create", "/q", "count=3,bytes=10")
	// Past the limit: counted, not refused.
	c.create("/q/a/deep", "", 0)
	want("create over the limit", "/q", "count=4,bytes=10")
	_, err = c.Set("/q/a", []byte("1"), -1)
	must(t, "set", err)
	want("setData shorter", "/q", "count=4,bytes=6")
	_, err = c.Set("/q", []byte("abcdefgh"), -1)
	must(t, "set the quota root", err)
	want("setData of the quota root", "/q", "count=4,bytes=11")
	must(t, "delete", c.Delete("/q/b", -1))
	want("delete", "/q", "count=3,bytes=9")
	// Nodes outside the subtree are not counted.
	c.create("/qq", "zzzz", 0)
	want("sibling with a common name prefix", "/q", "count=3,bytes=9")

	// A multi counts each op; a failed multi counts nothing.
	_, err = c.Multi(&zk.CreateRequest{Path: "/q/m", Data: []byte("mm"), Acl: zk.WorldACL(zk.PermAll)},
		&zk.SetDataRequest{Path: "/q/m", Data: []byte("mmmm"), Version: -1})
	must(t, "multi", err)
	want("multi", "/q", "count=4,bytes=13")
	_, err = c.Multi(&zk.CreateRequest{Path: "/q/n", Data: []byte("nn"), Acl: zk.WorldACL(zk.PermAll)},
		&zk.DeleteRequest{Path: "/q/missing", Version: -1})
	if err == nil {
		t.Fatal("multi with a missing node succeeded")
	}
	want("failed multi", "/q", "count=4,bytes=13")

	// A nested quota takes its subtree's changes; the outer one no longer
	// sees them (ZooKeeper updates only the deepest quota).
	c.create("/zookeeper/quota/q/a", "", 0)
	c.create("/zookeeper/quota/q/a/zookeeper_limits", "count=-1,bytes=100", 0)
	c.create("/zookeeper/quota/q/a/zookeeper_stats", "", 0)
	want("nested setquota", "/q/a", "count=2,bytes=1")
	c.create("/q/a/x", "123", 0)
	want("create under the nested quota", "/q/a", "count=3,bytes=4")
	want("create under the nested quota, outer", "/q", "count=4,bytes=13")
	c.create("/q/y", "1", 0)
	want("create under the outer quota only", "/q", "count=5,bytes=14")

	// An ephemeral's removal when its session closes counts too.
	e := connect(t, "e", cl.Addrs(), clientOpts{})
	e.create("/q/eph", "ee", zk.FlagEphemeral)
	want("ephemeral", "/q", "count=6,bytes=16")
	e.Close()
	c.barrier()
	for i := 0; i < 50 && stats("/q") != "count=5,bytes=14"; i++ {
		c.barrier()
	}
	want("ephemeral gone with its session", "/q", "count=5,bytes=14")

	// Removing the limits node ends the counting.
	must(t, "delete nested limits", c.Delete("/zookeeper/quota/q/a/zookeeper_limits", -1))
	c.create("/q/a/z", "1234567", 0)
	want("create after delquota of the nested quota: the outer quota counts", "/q", "count=6,bytes=21")
	want("nested stats left as they were", "/q/a", "count=3,bytes=4")

	// The stats node's own Stat: the data length follows, the rest stays.
	st := c.stat("/zookeeper/quota/q/zookeeper_stats")
	if st.Version != st0.Version || st.Mzxid != st0.Mzxid || st.Mtime != st0.Mtime {
		t.Errorf("stats node Stat changed: before %+v, after %+v", st0, st)
	}
	if int(st.DataLength) != len(stats("/q")) {
		t.Errorf("stats node data length %d, data %q", st.DataLength, stats("/q"))
	}
}
