package compat

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// go-zookeeper has no names for these codes.
const (
	marshallingErrorReply  = "unknown error: -5"
	newConfigNoQuorumReply = "unknown error: -13"
)

// newReconfigClusterAs is newReconfigCluster with the superuser
// super:password.
func newReconfigClusterAs(t testing.TB, n int, password string) reconfigCluster {
	t.Helper()
	super := zk.DigestACL(zk.PermAll, "super", password)[0].ID
	return newProcClusterOpts(t, n, procOpts{
		coordArgs: []string{"-super-digest", super},
		jvmProps:  []string{"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + super, "-Dzookeeper.skipACL=no"},
		dynamic:   true,
	}).(reconfigCluster)
}

// countingListener is a TCP listener the test owns that counts the
// connections it is offered (and closes them).
type countingListener struct {
	net.Listener
	port     int
	accepted atomic.Int32
}

func listenCounting(t testing.TB) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: ln, port: ln.Addr().(*net.TCPAddr).Port}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			t.Logf("listener :%d: a connection from %s", l.port, c.RemoteAddr())
			c.Close()
		}
	}()
	return l
}

// replyIs reports whether err is want: an error of go-zookeeper's, or the
// text it gives a code it has no name for.
func replyIs(err error, want any) bool {
	switch w := want.(type) {
	case nil:
		return err == nil
	case error:
		return errors.Is(err, w)
	case string:
		return err != nil && err.Error() == w
	}
	return false
}

// TestReconfigRules: what reconfig answers, and in which order it checks,
// as Apache ZooKeeper 3.8 does (observed on 3.8.0 with this test): a
// caller without WRITE on /zookeeper/config is refused NoAuth, and nothing
// is dialled on its behalf (listeners the test owns at the quorum,
// election and client ports it names get no connection), but only after
// BadVersion, the parse errors (BadArguments, or MarshallingError where
// ZooKeeper's parser throws) and NewConfigNoQuorum; the superuser adds an
// observer that is not running, and participants that are not running
// while the running participants stay a majority of the new membership,
// and is refused NewConfigNoQuorum once they would not (also with a
// participant down).
func TestReconfigRules(t *testing.T) {
	cl := newReconfigCluster(t, 3)
	quorum, election, clientPort := listenCounting(t), listenCounting(t), listenCounting(t)
	free := freePorts(t, 24) // ports nothing listens on: servers that are not running
	line := func(n int, q, e, c int, role string) string {
		return fmt.Sprintf("server.%d=127.0.0.1:%d:%d:%s;127.0.0.1:%d", n, q, e, role, c)
	}
	notRunning := func(n, k int, role string) string { return line(n, free[3*k], free[3*k+1], free[3*k+2], role) }
	owned := func(n int, role string) string { return line(n, quorum.port, election.port, clientPort.port, role) }

	// The clients stay off the server the test kills at the end (not the
	// leader: ZooKeeper's servers drop their clients while they elect).
	victim := (cl.Leader() + 1) % 3
	var stay []string
	for i := 0; i < 3; i++ {
		if i != victim {
			stay = append(stay, cl.Addr(i))
		}
	}
	anon := connect(t, "anon", stay, clientOpts{})
	root := connect(t, "root", stay, clientOpts{})
	must(t, "auth super", root.AddAuth("digest", []byte("super:secret")))
	cfg := waitConfig(t, anon, "a 3-server cluster", func(c zkConfig) bool { return c.roles() == "1:participant,2:participant,3:participant" })
	s1 := "server.1=" + cl.ConfigLine(0, "participant")

	type step struct {
		what               string
		joining, leaving   []string
		members            []string // a new membership (non-incremental)
		from               int64    // fromConfig; 0: -1
		want               any      // nil, an error, or the text of a code go-zookeeper does not name
		wantLines, notLine []string // on success: lines the reply holds / must not hold
	}
	run := func(c *client, who string, steps []step) {
		t.Helper()
		for _, s := range steps {
			from := s.from
			if from == 0 {
				from = -1
			}
			var data []byte
			var err error
			if s.members != nil {
				_, err = c.Reconfig(s.members, from)
			} else {
				_, err = c.IncrementalReconfig(s.joining, s.leaving, from)
			}
			if !replyIs(err, s.want) {
				t.Errorf("%s: %s: err = %v, want %v", who, s.what, err, s.want)
				continue
			}
			if err == nil {
				data, _, err = c.Get("/zookeeper/config")
				must(t, "get /zookeeper/config", err)
				for _, l := range s.wantLines {
					if !strings.Contains(string(data), l+"\n") {
						t.Errorf("%s: %s: /zookeeper/config %q lacks %q", who, s.what, data, l)
					}
				}
				for _, l := range s.notLine {
					if strings.Contains(string(data), l) {
						t.Errorf("%s: %s: /zookeeper/config %q still holds %q", who, s.what, data, l)
					}
				}
			}
		}
	}

	var four []string
	for k := 0; k < 4; k++ {
		four = append(four, notRunning(10+k, 1+k, "participant"))
	}
	run(anon, "anonymous", []step{
		// Refused NoAuth, with nothing dialled: the listeners stay silent.
		{what: "an observer at the test's listeners", joining: []string{owned(9, "observer")}, want: zk.ErrNoAuth},
		{what: "a participant at the test's listeners (3 of 4 run)", joining: []string{owned(9, "participant")}, want: zk.ErrNoAuth},
		{what: "kazoo's test_no_super_auth line", joining: []string{"server.999=0.0.0.0:1234:2345:observer;3456"}, want: zk.ErrNoAuth},
		{what: "two servers leave (the third is a quorum of itself)", leaving: []string{"1", "2"}, want: zk.ErrNoAuth},
		{what: "a new membership without a client port", members: []string{s1, strings.Split(notRunning(9, 0, "observer"), ";")[0]}, want: zk.ErrNoAuth},
		{what: "two joining servers at one address", joining: []string{notRunning(9, 0, "observer"), line(10, free[0], free[1], free[3], "observer")}, want: zk.ErrNoAuth},
		{what: "server.-1", joining: []string{line(-1, free[0], free[1], free[2], "observer")}, want: zk.ErrNoAuth},
		// Checked before the ACL.
		{what: "a stale fromConfig", joining: []string{owned(9, "observer")}, from: cfg.version - 1, want: zk.ErrBadVersion},
		{what: "a fromConfig in the future", joining: []string{owned(9, "observer")}, from: cfg.version + 1, want: zk.ErrBadVersion},
		{what: "a malformed server", joining: []string{"server.9=nonsense"}, want: zk.ErrBadArguments},
		{what: "no '='", joining: []string{"server.9"}, want: zk.ErrBadArguments},
		{what: "a joining server without its client port", joining: []string{strings.Split(notRunning(9, 0, "observer"), ";")[0]}, want: zk.ErrBadArguments},
		{what: "an unknown role", joining: []string{notRunning(9, 0, "boss")}, want: zk.ErrBadArguments},
		{what: "one port for quorum and election", joining: []string{line(9, free[0], free[0], free[2], "observer")}, want: zk.ErrBadArguments},
		{what: "every participant leaves", leaving: []string{"1", "2", "3"}, want: zk.ErrBadArguments},
		{what: "an unknown property in a new membership", members: []string{s1, "foo=bar"}, want: zk.ErrBadArguments},
		{what: "a new membership line without ports", members: []string{s1, "server.9=127.0.0.1"}, want: zk.ErrBadArguments},
		{what: "server.x", joining: []string{fmt.Sprintf("server.x=127.0.0.1:%d:%d:observer;%d", free[0], free[1], free[2])}, want: marshallingErrorReply},
		{what: "leaving x", leaving: []string{"x"}, want: marshallingErrorReply},
		{what: "port 70000", joining: []string{fmt.Sprintf("server.9=127.0.0.1:70000:%d:observer;%d", free[1], free[2])}, want: marshallingErrorReply},
		{what: "a new membership of observers only", members: []string{notRunning(9, 0, "observer")}, want: marshallingErrorReply},
		{what: "a new membership where 1 of 2 participants runs", members: []string{s1, owned(9, "participant")}, want: newConfigNoQuorumReply},
		{what: "4 participants that do not run join 3 that do", joining: four, want: newConfigNoQuorumReply},
	})
	if n := quorum.accepted.Load() + election.accepted.Load() + clientPort.accepted.Load(); n != 0 {
		t.Errorf("anonymous reconfigs made the server connect to the addresses they named: %d connections", n)
	}
	if again := readConfig(t, anon); again.raw != cfg.raw {
		t.Fatalf("refused reconfigs changed the config: %q, was %q", again.raw, cfg.raw)
	}

	obs := notRunning(7, 0, "observer")
	p10, p11, p12 := notRunning(10, 1, "participant"), notRunning(11, 2, "participant"), notRunning(12, 3, "participant")
	run(root, "superuser", []step{
		{what: "4 participants that do not run join 3 that do", joining: four, want: newConfigNoQuorumReply},
		{what: "an observer that does not run", joining: []string{obs}, wantLines: []string{obs}},
		{what: "a participant that does not run (3 of 4 run)", joining: []string{p10}, wantLines: []string{obs, p10}},
		{what: "another (3 of 5 run)", joining: []string{p11}, wantLines: []string{p10, p11}},
		{what: "a third (3 of 6 run)", joining: []string{p12}, want: newConfigNoQuorumReply},
		{what: "they leave", leaving: []string{"10", "11", "7"}, notLine: []string{"server.10=", "server.11=", "server.7="}},
	})
	// anon's server may trail root's a moment.
	waitConfig(t, anon, "after the superuser's reconfigs", func(c zkConfig) bool { return c.roles() == "1:participant,2:participant,3:participant" })

	// A participant down: 2 of 3 run.
	t.Logf("killing server %d", victim+1)
	cl.Kill(victim)
	// Until the leader notices its follower gone (ZooKeeper's at once, as a
	// rule, its connection closed), the anonymous request passes the quorum
	// check and is refused NoAuth, changing nothing: asked again until then.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := anon.IncrementalReconfig([]string{p10}, nil, -1)
		if replyIs(err, newConfigNoQuorumReply) {
			break
		}
		if !replyIs(err, zk.ErrNoAuth) || time.Now().After(deadline) {
			t.Fatalf("anonymous, one participant down: a participant that does not run (2 of 4 run): err = %v, want %v", err, newConfigNoQuorumReply)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run(root, "superuser, one participant down", []step{
		{what: "a participant that does not run (2 of 4 run)", joining: []string{p10}, want: newConfigNoQuorumReply},
		{what: "an observer that does not run", joining: []string{obs}, wantLines: []string{obs}},
		{what: "the server that is down leaves", leaving: []string{fmt.Sprint(victim + 1)}, notLine: []string{fmt.Sprintf("server.%d=", victim+1)}},
	})
}

// kazoo's own reconfig tests, unchanged from the kazoo source Debian
// ships (kazoo/tests/test_client.py, TestReconfig: test_no_super_auth,
// test_add_remove_observer, test_bad_input), with only kazoo's harness
// pointed at this cluster (testdata/kazoo_own_reconfig.py): an anonymous
// reconfig adding an observer is refused NoAuth; the superuser adds an
// observer that is not running (ports bound and not listening) and removes
// it; a fromConfig in the future is refused BadVersion; a malformed line
// BadArguments.
func TestKazooOwnReconfigTests(t *testing.T) {
	requireKazoo(t)
	const tests = "/usr/lib/python3/dist-packages/kazoo/tests/test_client.py"
	if _, err := os.Stat(tests); err != nil {
		t.Skipf("kazoo's own tests are not installed: %v", err)
	}
	cl := newReconfigClusterAs(t, 3, "test") // kazoo's harness: super:test
	names := []string{"test_no_super_auth", "test_add_remove_observer", "test_bad_input"}
	runKazooArgs(t, "kazoo_own_reconfig.py", append([]string{strings.Join(cl.Addrs(), ",")}, names...), names)
}
