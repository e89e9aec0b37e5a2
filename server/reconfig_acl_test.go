package server

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"coord/internal/freeport"
)

// reconfigTestCluster starts voters servers with the superuser
// super:secret, and returns it with the superuser's digest id.
func reconfigTestCluster(t *testing.T, voters int) (*TestCluster, string) {
	t.Helper()
	super := gozk.DigestACL(gozk.PermAll, "super", "secret")[0].ID
	// Reconfig names real addresses: raft over TCP.
	c := NewTestClusterWith(t, voters, 0, func(cfg *Config) { onTCP(cfg); cfg.SuperDigest = super })
	return c, super
}

// zkSession opens a go-zookeeper session on addrs, as the superuser if
// super, and waits until it has one.
func zkSession(t *testing.T, addrs []string, super bool) *gozk.Conn {
	t.Helper()
	conn, events, err := gozk.Connect(addrs, 10*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	deadline := time.After(30 * time.Second)
	for conn.State() != gozk.StateHasSession {
		select {
		case <-events:
		case <-deadline:
			t.Fatalf("no session on %v: %v", addrs, conn.State())
		}
	}
	if super {
		if err := conn.AddAuth("digest", []byte("super:secret")); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// retryLost runs op until it returns something other than a lost
// connection (a leader lost under load: coord closes the connection of a
// request whose fate it does not know) or 30 s have passed, and returns
// that.
func retryLost(op func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := op()
		lost := errors.Is(err, gozk.ErrConnectionClosed) || errors.Is(err, gozk.ErrNoServer) || errors.Is(err, gozk.ErrSessionMoved)
		if !lost || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// create creates path (a try whose reply was lost may have created it).
func create(conn *gozk.Conn, path, data string) error {
	return retryLost(func() error {
		_, err := conn.Create(path, []byte(data), 0, gozk.WorldACL(gozk.PermAll))
		if errors.Is(err, gozk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

// waitParticipants waits until /zookeeper/config shows n participants (the
// leader writes it after raft's configuration changes).
func waitParticipants(t *testing.T, conn *gozk.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		data, _, err := conn.Get("/zookeeper/config")
		if err == nil && strings.Count(string(data), ":participant") == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/zookeeper/config is %q (%v), want %d participants", data, err, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeAddrs returns n loopback addresses whose ports were free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// An anonymous reconfig naming addresses the test listens on is refused
// NoAuth (ZooKeeper 3.8: the superuser alone may write /zookeeper/config)
// and the server connects to none of them: the ACL is checked before
// anything the request names is dialled. Before the fix the server dialled
// the line's election port (its gRPC port) first, and answered
// NewConfigNoQuorum.
func TestReconfigAnonymousDialsNothing(t *testing.T) {
	c, _ := reconfigTestCluster(t, 3)
	var accepted atomic.Int32
	var ports []string
	for i := 0; i < 3; i++ { // quorum (raft), election (gRPC), client
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, port(ln.Addr().String()))
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				t.Logf("a connection to the test's listener %s from %s", ln.Addr(), conn.RemoteAddr())
				conn.Close()
			}
		}()
	}
	anon := zkSession(t, c.ZKAddrs(), false)
	waitParticipants(t, anon, 3)
	for _, role := range []string{"participant", "observer"} {
		joining := fmt.Sprintf("server.9=127.0.0.1:%s:%s:%s;127.0.0.1:%s", ports[0], ports[1], role, ports[2])
		err := retryLost(func() error { _, err := anon.IncrementalReconfig([]string{joining}, nil, -1); return err })
		if !errors.Is(err, gozk.ErrNoAuth) {
			t.Errorf("anonymous reconfig adding %s: err = %v, want %v", joining, err, gozk.ErrNoAuth)
		}
		members := []string{joining}
		var data []byte
		if err := retryLost(func() (err error) { data, _, err = anon.Get("/zookeeper/config"); return err }); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(l, "server.") {
				members = append(members, l)
			}
		}
		err = retryLost(func() error { _, err := anon.Reconfig(members, -1); return err })
		if !errors.Is(err, gozk.ErrNoAuth) {
			t.Errorf("anonymous reconfig with new members %v: err = %v, want %v", members, err, gozk.ErrNoAuth)
		}
	}
	time.Sleep(200 * time.Millisecond) // a dial that was started would have arrived
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the anonymous reconfigs made the server connect to the addresses they named %d times", n)
	}
	c.WaitMembers(3, 0)
}

// The superuser adds an observer that is not running, and a participant
// that is not running while the 3 running voters stay a majority of 4: both
// accepted, as ZooKeeper 3.8 accepts them (raft has them as a non-voter and
// a voter); data is written; then each starts, under the id the reconfig
// gave it (its number), catches up and serves reads of the data written
// before it started; and the cluster keeps committing.
func TestReconfigAddsServersBeforeTheyRun(t *testing.T) {
	c, super := reconfigTestCluster(t, 3)
	root := zkSession(t, c.ZKAddrs(), true)
	waitParticipants(t, root, 3)
	if err := create(root, "/before", "written before the reconfig"); err != nil {
		t.Fatal(err)
	}

	type newServer struct {
		n                 int
		role              string
		raft, grpc, zk    string
		observer          bool
		voters, nonvoters int // the membership once it is in
	}
	addrs := freeAddrs(t, 6)
	servers := []newServer{
		{n: 4, role: "observer", raft: addrs[0], grpc: addrs[1], zk: addrs[2], observer: true, voters: 3, nonvoters: 1},
		{n: 5, role: "participant", raft: addrs[3], grpc: addrs[4], zk: addrs[5], voters: 4, nonvoters: 1},
	}
	for _, ns := range servers {
		line := fmt.Sprintf("server.%d=127.0.0.1:%s:%s:%s;%s", ns.n, port(ns.raft), port(ns.grpc), ns.role, ns.zk)
		// A reply lost with the connection (a leader lost under load):
		// what /zookeeper/config shows tells whether it was done.
		var data []byte
		err := retryLost(func() error {
			_, err := root.IncrementalReconfig([]string{line}, nil, -1)
			if err != nil {
				if data, _, gerr := root.Get("/zookeeper/config"); gerr == nil && strings.Contains(string(data), line+"\n") {
					return nil
				}
			}
			return err
		})
		if err != nil {
			t.Fatalf("adding %s, not running: %v", line, err)
		}
		if err := retryLost(func() (err error) { data, _, err = root.Get("/zookeeper/config"); return err }); err != nil || !strings.Contains(string(data), line+"\n") {
			t.Fatalf("after adding %s: /zookeeper/config is %q, %v", line, data, err)
		}
		c.WaitMembers(ns.voters, ns.nonvoters)
		if err := create(root, fmt.Sprintf("/after-%d", ns.n), "written before it ran"); err != nil {
			t.Fatalf("a write with server.%d in the membership and not running: %v", ns.n, err)
		}
	}

	for _, ns := range servers {
		cfg := testConfig(t, fmt.Sprint(ns.n))
		cfg.SuperDigest = super
		cfg.RaftAddr, cfg.GRPCAddr, cfg.ZKAddr = ns.raft, ns.grpc, ns.zk
		cfg.Observer = ns.observer
		for _, s := range c.Servers[:3] {
			cfg.Peers = append(cfg.Peers, Peer{ID: s.ID(), RaftAddr: s.RaftAddr(), GRPCAddr: s.GRPCAddr()})
		}
		s := c.Start(cfg)
		conn := zkSession(t, []string{s.ZKAddr()}, false)
		for _, p := range []string{"/before", fmt.Sprintf("/after-%d", ns.n)} {
			var data []byte
			err := retryLost(func() (err error) { data, _, err = conn.Get(p); return err })
			if err != nil || !strings.HasPrefix(string(data), "written before") {
				t.Fatalf("server.%d (%s), started after the reconfig: get %s = %q, %v", ns.n, ns.role, p, data, err)
			}
		}
		if err := create(conn, fmt.Sprintf("/through-%d", ns.n), ""); err != nil {
			t.Fatalf("a write through server.%d: %v", ns.n, err)
		}
	}
	c.WaitMembers(4, 1)
	var data []byte
	if err := retryLost(func() (err error) {
		if _, err = root.Sync("/"); err == nil {
			data, _, err = root.Get("/zookeeper/config")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range servers {
		if want := fmt.Sprintf("server.%d=127.0.0.1:%s:%s:%s;%s\n", ns.n, port(ns.raft), port(ns.grpc), ns.role, ns.zk); !strings.Contains(string(data), want) {
			t.Errorf("/zookeeper/config %q lacks %q", data, want)
		}
	}
}
