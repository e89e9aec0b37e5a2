package compat

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkConfig is /zookeeper/config as a client reads it: its server lines by
// id and its version.
type zkConfig struct {
	servers map[int]string // id → host:quorumPort:electionPort:role;clientAddr
	version int64
	stat    *zk.Stat
	raw     string
}

var serverLineRE = regexp.MustCompile(`^server\.(\d+)=([^=]+)$`)

// readConfig reads and parses /zookeeper/config, checking ZooKeeper's
// shape: server lines, then version=<hex> with no newline after it, equal
// to the node's mzxid. A read that loses its connection is tried again:
// ZooKeeper's servers drop their clients while they elect a new leader,
// which a reconfig that removes the leader starts.
func readConfig(t testing.TB, c *client) zkConfig {
	t.Helper()
	var data []byte
	var st *zk.Stat
	var err error
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, st, err = c.Get("/zookeeper/config")
		lost := errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
		if !lost || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("get /zookeeper/config: %v", err)
	}
	cfg := zkConfig{servers: map[int]string{}, stat: st, raw: string(data)}
	if len(data) == 0 {
		return cfg // not written yet
	}
	lines := strings.Split(string(data), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "version=") {
		t.Fatalf("/zookeeper/config %q: last line is not version=", data)
	}
	cfg.version, err = strconv.ParseInt(strings.TrimPrefix(last, "version="), 16, 64)
	if err != nil {
		t.Fatalf("/zookeeper/config %q: version: %v", data, err)
	}
	for _, l := range lines[:len(lines)-1] {
		m := serverLineRE.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("/zookeeper/config %q: line %q is not server.N=...", data, l)
		}
		n, _ := strconv.Atoi(m[1])
		cfg.servers[n] = m[2]
	}
	return cfg
}

// waitConfig waits until /zookeeper/config read through c satisfies ok.
func waitConfig(t testing.TB, c *client, what string, ok func(zkConfig) bool) zkConfig {
	t.Helper()
	cfg, done := pollConfig(t, c, 20*time.Second, ok)
	if !done {
		t.Fatalf("%s: /zookeeper/config is still %q", what, cfg.raw)
	}
	return cfg
}

// pollConfig reads /zookeeper/config through c until it satisfies ok or d
// has passed, and returns the last config read and whether it did.
func pollConfig(t testing.TB, c *client, d time.Duration, ok func(zkConfig) bool) (zkConfig, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		cfg := readConfig(t, c)
		if ok(cfg) {
			return cfg, true
		}
		if time.Now().After(deadline) {
			return cfg, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// roles returns "id:role" for each server line, in id order.
func (c zkConfig) roles() string {
	var out []string
	for n := 1; n <= 16; n++ {
		if v, ok := c.servers[n]; ok {
			addr, _, _ := strings.Cut(v, ";")
			parts := strings.Split(addr, ":")
			out = append(out, fmt.Sprintf("%d:%s", n, parts[len(parts)-1]))
		}
	}
	return strings.Join(out, ",")
}

// reconfigCluster is a process cluster whose membership a client may change
// with reconfig.
type reconfigCluster interface {
	procCluster
	// ConfigLine is server i's line in /zookeeper/config after
	// "server.N=", with the given role. The election port slot differs:
	// ZooKeeper's election port, coord's gRPC port.
	ConfigLine(i int, role string) string
}

// newReconfigCluster starts n participants of the selected target as
// processes with reconfig enabled and the superuser super:secret (coord:
// -super-digest; ZooKeeper: its superDigest property and a dynamic
// configuration, ACLs checked).
func newReconfigCluster(t testing.TB, n int) reconfigCluster {
	t.Helper()
	super := zk.DigestACL(zk.PermAll, "super", "secret")[0].ID
	return newProcClusterOpts(t, n, procOpts{
		coordArgs: []string{"-super-digest", super},
		jvmProps:  []string{"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + super, "-Dzookeeper.skipACL=no"},
		dynamic:   true,
	}).(reconfigCluster)
}

// reconfigure runs a reconfig through c until /zookeeper/config satisfies
// done, and returns the reply's Stat (nil if the reply was lost) and the
// config. ZooKeeper's servers drop their clients when a reconfig removes the
// leader, and while they elect one: a reply lost that way leaves the outcome
// unknown, so the test reads it from /zookeeper/config, as a client must, and
// sends the reconfig again if it did not happen (a try on a server still
// electing is lost before it is proposed, or refused as in progress).
func reconfigure(t testing.TB, c *client, what string, try func() (*zk.Stat, error), done func(zkConfig) bool) (*zk.Stat, zkConfig) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		st, err := try()
		lost := errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer)
		if err == nil || (!lost && attempt == 1) {
			must(t, what, err)
			return st, waitConfig(t, c, what, done)
		}
		t.Logf("%s (try %d): %v; reading the outcome from /zookeeper/config", what, attempt, err)
		cfg, ok := pollConfig(t, c, 10*time.Second, done)
		if ok {
			return nil, cfg
		}
		if attempt == 3 {
			t.Fatalf("%s: not done after %d tries: /zookeeper/config is %q", what, attempt, cfg.raw)
		}
	}
}

// TestReconfig: /zookeeper/config shows the membership in ZooKeeper's format
// and reconfig changes it (go-zookeeper's IncrementalReconfig and
// Reconfig): refused NoAuth without WRITE on the node, BadVersion for a
// stale fromConfig, a data watch fires on every change; removing a voter,
// adding it back as an observer (which stays one under the next leader),
// then as a participant (non-incremental);
// and the new membership survives SIGKILL and restart of the leader and a
// follower while clients reconnect at once.
func TestReconfig(t *testing.T) {
	cl := newReconfigCluster(t, 4)
	line := cl.ConfigLine
	// Clients stay off servers 3 and 4, which the test removes: a removed
	// server loses its leader and drops its clients, as ZooKeeper's does.
	stayers := cl.Addrs()[:2]
	anon := connect(t, "anon", stayers, clientOpts{})
	cfg := waitConfig(t, anon, "a 4-server cluster", func(c zkConfig) bool { return c.roles() == "1:participant,2:participant,3:participant,4:participant" })
	for i := 0; i < 4; i++ {
		if got, want := cfg.servers[i+1], line(i, "participant"); got != want {
			t.Errorf("server.%d=%s, want %s", i+1, got, want)
		}
	}
	if cfg.version != cfg.stat.Mzxid {
		t.Errorf("version=%x, mzxid %x", cfg.version, cfg.stat.Mzxid)
	}

	_, err := anon.IncrementalReconfig(nil, []string{"4"}, -1)
	wantErr(t, "reconfig without WRITE on /zookeeper/config", err, zk.ErrNoAuth)
	root := connect(t, "root", stayers, clientOpts{})
	must(t, "auth super", root.AddAuth("digest", []byte("super:secret")))
	_, err = root.IncrementalReconfig(nil, []string{"4"}, cfg.version-1)
	wantErr(t, "reconfig from a stale version", err, zk.ErrBadVersion)
	_, err = root.IncrementalReconfig([]string{"server.9=nonsense"}, nil, -1)
	wantErr(t, "reconfig with a malformed server", err, zk.ErrBadArguments)
	if again := readConfig(t, anon); again.raw != cfg.raw {
		t.Fatalf("refused reconfigs changed the config: %q", again.raw)
	}

	_, _, changed, err := anon.GetW("/zookeeper/config")
	must(t, "getData watch on /zookeeper/config", err)
	from := cfg.version
	st, cfg := reconfigure(t, root, "reconfig -remove 4", func() (*zk.Stat, error) { return root.IncrementalReconfig(nil, []string{"4"}, from) },
		func(c zkConfig) bool { return len(c.servers) != 4 })
	if ev := waitEvent(t, "the config watch", changed); ev.Type != zk.EventNodeDataChanged || ev.Path != "/zookeeper/config" {
		t.Errorf("event %+v", ev)
	}
	if cfg.roles() != "1:participant,2:participant,3:participant" || st != nil && st.Mzxid != cfg.stat.Mzxid {
		t.Fatalf("after removing 4: %q (reply %+v)", cfg.raw, st)
	}

	from = cfg.version
	_, cfg = reconfigure(t, root, "reconfig -add server.4 as observer", func() (*zk.Stat, error) {
		return root.IncrementalReconfig([]string{"server.4=" + line(3, "observer")}, nil, from)
	}, func(c zkConfig) bool { return len(c.servers) == 4 })
	if cfg.roles() != "1:participant,2:participant,3:participant,4:observer" || cfg.servers[4] != line(3, "observer") {
		t.Fatalf("after adding 4 as observer: %q", cfg.raw)
	}
	// The leader keeps the text in step with raft: it must not change it
	// back.
	time.Sleep(time.Second)
	if again := readConfig(t, anon); again.raw != cfg.raw {
		t.Fatalf("config changed by itself after the reconfig: %q, then %q", cfg.raw, again.raw)
	}
	// So must the next leader: 4's role is in the replicated text, not in
	// the new leader's own configuration (which, as every server's, names
	// 4 a participant).
	cl.Restart(cl.Leader())
	cl.Leader()
	time.Sleep(time.Second)
	if again := readConfig(t, anon); again.raw != cfg.raw {
		t.Fatalf("config changed after the leader's restart: %q, then %q", cfg.raw, again.raw)
	}
	// An observer serves: a write through it reaches the others.
	obs := connect(t, "on the observer", []string{cl.Addr(3)}, clientOpts{})
	must(t, "create through the observer", errOf(obs.Create("/via-observer", []byte("x"), 0, zk.WorldACL(zk.PermAll))))

	// Non-incremental: 4 becomes a participant.
	var members []string
	for i := 0; i < 4; i++ {
		members = append(members, fmt.Sprintf("server.%d=%s", i+1, line(i, "participant")))
	}
	_, cfg = reconfigure(t, root, "reconfig -members (4 as participant)", func() (*zk.Stat, error) { return root.Reconfig(members, -1) },
		func(c zkConfig) bool { return !strings.Contains(c.roles(), "observer") })
	if cfg.roles() != "1:participant,2:participant,3:participant,4:participant" {
		t.Fatalf("after the new membership: %q", cfg.raw)
	}

	// Remove a voter, then crash and restart the leader and server 1 while
	// clients reconnect at once: the new membership stays.
	want := "1:participant,2:participant,4:participant"
	if _, cfg = reconfigure(t, root, "reconfig -remove 3", func() (*zk.Stat, error) { return root.IncrementalReconfig(nil, []string{"3"}, -1) },
		func(c zkConfig) bool { return len(c.servers) == 3 }); cfg.roles() != want {
		t.Fatalf("after removing 3: %q", cfg.raw)
	}
	others := []string{cl.Addr(0), cl.Addr(1), cl.Addr(3)}
	reader := connect(t, "reader", others, clientOpts{})
	leader := cl.Leader()
	cl.Restart(leader)
	if leader != 0 {
		cl.Restart(0)
	}
	for _, i := range []int{0, 1, 3} {
		// A restarted JVM takes a while to rejoin: up to a minute.
		c := connectWithin(t, fmt.Sprintf("after restart, on server %d", i+1), []string{cl.Addr(i)}, 10*time.Second, time.Minute)
		got := waitConfig(t, c, "after restart", func(c zkConfig) bool { return c.roles() == want })
		if got.raw != cfg.raw {
			t.Errorf("server %d after restart: %q, want %q", i+1, got.raw, cfg.raw)
		}
	}
	if got := waitConfig(t, reader, "the reconnected reader", func(c zkConfig) bool { return c.roles() == want }); got.raw != cfg.raw {
		t.Errorf("reader: %q, want %q", got.raw, cfg.raw)
	}
	retryWrite(t, reader, "write after restart", func() error {
		_, err := reader.Create("/after-restart", nil, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) { // a try whose reply was lost
			return nil
		}
		return err
	})
}

// zkCli.sh's config and reconfig, unchanged: config prints the membership;
// reconfig -remove and -add of an observer and of a participant (voter)
// print the new configuration, and config shows it.
func TestZkCliReconfig(t *testing.T) {
	requireZkCli(t)
	cl := newReconfigCluster(t, 4)
	line := func(i int, role string) string { return fmt.Sprintf("server.%d=%s", i+1, cl.ConfigLine(i, role)) }
	// The watcher stays off servers 2 and 4, which the script removes: a
	// removed server answers from the state it had when it left.
	c := connect(t, "watcher", []string{cl.Addr(0), cl.Addr(2)}, clientOpts{})
	waitConfig(t, c, "a 4-server cluster", func(c zkConfig) bool { return len(c.servers) == 4 })
	commands := strings.Join([]string{
		"config",
		"reconfig -remove 4",
		"addauth digest super:secret",
		"reconfig -remove 4",
		"config",
		"reconfig -add " + line(3, "observer"),
		"reconfig -remove 4",
		"reconfig -add " + line(3, "participant"),
		"reconfig -remove 2",
		"config",
		"quit",
	}, "\n") + "\n"
	out := zkCli(t, cl.Addr(0), []byte(commands))
	t.Logf("zkCli.sh:\n%s", out)
	// Each step's output must appear after the one before it. A step's
	// reply may instead be ConnectionLoss against ZooKeeper, whose servers
	// drop their clients when a reconfig removes the leader (with equal
	// zxids the highest id leads: server 4); the final config shows the
	// outcome. coord keeps the connection, so there every reply must come.
	lost := "never"
	if cl.Name() == "zookeeper" {
		lost = "KeeperErrorCode = ConnectionLoss"
	}
	rest := out
	for k, step := range [][]string{
		{line(0, "participant"), line(3, "participant"), "version="},                         // config
		{"Insufficient permission"},                                                          // reconfig without the superuser (NoAuth)
		{"Committed new configuration", line(2, "participant"), "version="},                  // -remove 4
		{line(2, "participant"), "version="},                                                 // config
		{"Committed new configuration", line(3, "observer")},                                 // -add observer
		{"Committed new configuration"},                                                      // -remove 4
		{"Committed new configuration", line(3, "participant")},                              // -add participant
		{"Committed new configuration", line(0, "participant"), line(2, "participant")},      // -remove 2
		{line(0, "participant"), line(2, "participant"), line(3, "participant"), "version="}, // config
	} {
		if k >= 2 { // after the first reconfig
			if i, j := strings.Index(rest, lost), strings.Index(rest, step[0]); i >= 0 && (j < 0 || i < j) {
				t.Logf("step %d's reply was lost with the connection (ZooKeeper elects a new leader)", k)
				rest = rest[i+len(lost):]
				continue
			}
		}
		for _, want := range step {
			i := strings.Index(rest, want)
			if i < 0 {
				t.Fatalf("zkCli.sh output lacks %q after what came before", want)
			}
			rest = rest[i+len(want):]
		}
	}
	// A read on another server may trail the commit zkCli.sh saw.
	final := waitConfig(t, c, "after -remove 2", func(c zkConfig) bool {
		return c.roles() == "1:participant,3:participant,4:participant"
	})
	if strings.Contains(final.raw, line(1, "participant")) {
		t.Errorf("server 2 still in %q", final.raw)
	}
}

// kazoo's reconfig (KazooClient.reconfig with joining, leaving, new_members
// and from_config) on a 4-server cluster with the superuser: refused
// NoAuth to an anonymous client and BadVersion for a stale from_config;
// server 4 removed (a DataWatch sees it), added back as an observer, made a
// participant by a non-incremental new_members, and removed again
// (testdata/kazoo_reconfig.py).
func TestKazooReconfig(t *testing.T) {
	requireKazoo(t)
	cl := newReconfigCluster(t, 4)
	runKazooArgs(t, "kazoo_reconfig.py", []string{strings.Join(cl.Addrs()[:3], ","),
		"server.4=" + cl.ConfigLine(3, "observer"), "server.4=" + cl.ConfigLine(3, "participant")},
		[]string{"refused_without_superuser", "stale_version", "remove", "watch", "add_observer", "new_members", "remove_again"})
}
