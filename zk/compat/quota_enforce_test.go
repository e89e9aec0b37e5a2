package compat

import (
	"strconv"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"
)

// TestQuotaEnforced: with quota enforcement on (coord -enforce-quota,
// ZooKeeper -Dzookeeper.enforceQuota=true), zkCli.sh's setquota -N (hard
// count) and -B (hard bytes) make creates and setData that would pass them
// fail with QuotaExceeded (-125) and change nothing, in a multi too; soft
// limits (-n, -b) are only counted; shrinking data is always allowed. Then
// the leader is killed (-9) and started again while clients reconnect at
// once: it replays the log to the same state and the limits still hold;
// then a follower is killed and started again (on coord without
// -enforce-quota) and replays to the same state too: the verdict is in the
// log, not in the server's setting. (Which server leads decides: coord's
// leader stamps writes with its own -enforce-quota.)
func TestQuotaEnforced(t *testing.T) {
	requireZkCli(t)
	cl := newProcClusterOpts(t, 3, procOpts{
		coordArgs: []string{"-enforce-quota"},
		jvmProps:  []string{"-Dzookeeper.enforceQuota=true"},
	})
	lead := cl.Leader()
	w := connect(t, "w", cl.Addrs(), clientOpts{})
	for _, p := range []string{"/q", "/b", "/s"} {
		w.create(p, "", 0)
	}
	out := zkCli(t, cl.Addr(lead), []byte("setquota -N 2 /q\nsetquota -B 10 /b\nsetquota -n 1 /s\n"))
	t.Logf("zkCli.sh setquota:\n%s", out)
	limits := func(p string) string {
		t.Helper()
		d, _, err := w.Get("/zookeeper/quota" + p + "/zookeeper_limits")
		must(t, "get limits of "+p, err)
		return string(d)
	}
	// The format ZooKeeper 3.8's zkCli.sh writes (StatsTrack): the soft
	// count and bytes (-1: none) first, then the hard limits, sorted, after
	// an '=' that older parsers ignore.
	for p, want := range map[string]string{
		"/q": "count=-1,bytes=-1=;byteHardLimit=-1;countHardLimit=2",
		"/b": "count=-1,bytes=-1=;byteHardLimit=10;countHardLimit=-1",
		"/s": "count=1,bytes=-1=;byteHardLimit=-1;countHardLimit=-1",
	} {
		if got := limits(p); got != want {
			t.Errorf("limits of %s after setquota: %q, want %q", p, got, want)
		}
	}

	c := connect(t, "c", cl.Addrs(), clientOpts{})
	exceeded := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), strconv.Itoa(codeQuotaExceeded)) {
			t.Errorf("%s: %v, want error %d (QuotaExceeded)", what, err, codeQuotaExceeded)
		}
	}
	create := func(p, data string) error {
		_, err := c.Create(p, []byte(data), 0, zk.WorldACL(zk.PermAll))
		return err
	}
	set := func(p, data string) error {
		_, err := c.Set(p, []byte(data), -1)
		return err
	}

	// Hard count 2: /q itself and one child.
	must(t, "create /q/a (count 2 of 2)", create("/q/a", ""))
	exceeded("create /q/b (count 3 of 2)", create("/q/b", ""))
	exceeded("create /q/a/deep (count 3 of 2)", create("/q/a/deep", "x"))
	_, err := c.Create("/q/seq-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	exceeded("create sequential under /q", err)
	must(t, "setData within /q (count unchanged)", set("/q/a", "any size of data"))
	// A refused op fails the multi: ZooKeeper's per-op results.
	_, err = c.Multi(&zk.SetDataRequest{Path: "/q/a", Data: []byte("m"), Version: -1},
		&zk.CreateRequest{Path: "/q/m", Acl: zk.WorldACL(zk.PermAll)})
	exceeded("multi creating under full /q", err)

	// Hard bytes 10.
	must(t, "create /b/x, 6 bytes", create("/b/x", "123456"))
	must(t, "setData /b/x to 10 bytes (10 of 10)", set("/b/x", "1234567890"))
	exceeded("setData /b/x to 11 bytes", set("/b/x", "12345678901"))
	exceeded("create /b/z, 1 byte (11 of 10)", create("/b/z", "1"))
	must(t, "create /b/y, no data (no byte check)", create("/b/y", ""))
	must(t, "setData /b/x shorter", set("/b/x", "1"))
	exceeded("create /b/big, 10 bytes (11 of 10)", create("/b/big", "1234567890"))
	must(t, "create /b/nine, 9 bytes (10 of 10)", create("/b/nine", "123456789"))
	must(t, "setData /b/nine shorter again", set("/b/nine", "1234"))

	// Soft limits: warned about in ZooKeeper's log, never refused.
	must(t, "create past a soft count", create("/s/a", "12345"))
	must(t, "create past soft limits", create("/s/b", "12345"))

	// A multi whose ops each fit alone but not together (bytes at 5 of
	// 10): ZooKeeper checks each op of a multi against the stats before
	// the multi, not counting its earlier ops, and lets it through.
	_, err = c.Multi(&zk.CreateRequest{Path: "/b/m1", Data: []byte("1234"), Acl: zk.WorldACL(zk.PermAll)},
		&zk.CreateRequest{Path: "/b/m2", Data: []byte("1234"), Acl: zk.WorldACL(zk.PermAll)})
	must(t, "a multi of two creates that fit alone but not together", err)

	stats := func(cc *client, p string) string {
		t.Helper()
		d, _, err := cc.Get("/zookeeper/quota" + p + "/zookeeper_stats")
		must(t, "get stats of "+p, err)
		return string(d)
	}
	children := func(cc *client, p string) string {
		t.Helper()
		kids, _, err := cc.Children(p)
		must(t, "children of "+p, err)
		return strings.Join(sortedCopy(kids), ",")
	}
	type snap struct{ q, b, s, qk, bk string }
	take := func(cc *client) snap {
		cc.barrier()
		return snap{stats(cc, "/q"), stats(cc, "/b"), stats(cc, "/s"), children(cc, "/q"), children(cc, "/b")}
	}
	before := take(c)
	t.Logf("%s before the restart: %+v", cl.Name(), before)
	if want := (snap{"count=2,bytes=16", "count=6,bytes=13", "count=3,bytes=10", "a", "m1,m2,nine,x,y"}); before != want {
		t.Errorf("after the writes: %+v, want %+v", before, want)
	}

	// kill -9 the leader and start it again at once, while the clients
	// reconnect: it replays its log to the same state, and the limits
	// still hold.
	cl.Restart(lead)
	r := connect(t, "restarted", []string{cl.Addr(lead)}, clientOpts{}) // what it replayed
	if after := take(r); after != before {
		t.Errorf("the restarted leader's state: %+v, want %+v", after, before)
	}
	if after := take(c); after != before {
		t.Errorf("after the restart: %+v, want %+v", after, before)
	}
	exceeded("create /q/b after the restart", create("/q/b", ""))
	exceeded("setData /b/x past the limit after the restart", set("/b/x", "12345678901"))

	// kill -9 a follower and start it again, on coord without
	// -enforce-quota: the verdicts are in the log, so its replay reaches
	// the same state whatever its own setting.
	fol := (cl.Leader() + 1) % 3
	if cp, ok := cl.(*coordProcs); ok {
		nd := cp.nodes[fol]
		var args []string
		for _, a := range nd.args {
			if a != "-enforce-quota" {
				args = append(args, a)
			}
		}
		nd.args = args
	}
	cl.Restart(fol)
	f := connect(t, "restarted follower", []string{cl.Addr(fol)}, clientOpts{})
	if after := take(f); after != before {
		t.Errorf("the restarted follower's state: %+v, want %+v", after, before)
	}
	// Past the hard limit now (13 of 10): any growth is refused,
	// shrinking is not.
	exceeded("create /b/more after the multi overshot", create("/b/more", "1"))
	must(t, "setData /b/m1 shorter after the multi overshot", set("/b/m1", ""))
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
