// Package testcluster runs a coord cluster inside a test's process: real
// servers (server.New) whose peer planes (raft and server-to-server gRPC)
// meet on one in-memory network (internal/memnet) and whose raft log,
// stable store and snapshots are raft's in-memory stores. Nothing touches
// a disk but each server's members file, no TCP carries raft, and the
// network can be cut between any servers (Isolate, Partition) and healed;
// a server can be stopped (Kill) and started again on what its stores hold
// (Restart). Clients still reach every server over loopback TCP (ZKAddrs,
// Addrs), as real clients do. Waits are on the servers' change channels,
// not on polling.
//
// Tests that are about the real process, the real disk or the real network
// (kill -9, fsync, iptables) keep using real processes (jepsen/, cmd/coord).
package testcluster

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"coord/internal/memnet"
	"coord/server"
)

// Key is the cluster key of every test cluster's servers. It is no secret.
var Key = []byte("coord test cluster key, not a secret")

// TB is the part of testing.TB a cluster uses (a package's TestMain can
// hand in its own, for a cluster shared by its tests).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Log(args ...any)
}

// Cluster is a running in-process cluster.
type Cluster struct {
	tb      TB
	Net     *memnet.Network
	Servers []*server.Server
	configs []server.Config
}

// Config returns a server configuration with fast timings for in-process
// tests: id's peer plane on the cluster's in-memory network at a made-up
// loopback address, in-memory raft stores, client ports on 127.0.0.1:0.
func (c *Cluster) Config(id string, n int) server.Config {
	cfg := server.DefaultConfig()
	cfg.ID = id
	cfg.DataDir = c.tb.TempDir()
	cfg.RaftAddr = fmt.Sprintf("127.77.0.%d:7000", n)
	cfg.PeerNetwork = c.Net.Host(id)
	cfg.Stores = &server.Stores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()}
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.GossipAddr = ""
	cfg.Bootstrap = false
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ZKAddr = "127.0.0.1:0"
	cfg.Tick = 100 * time.Millisecond
	cfg.MinSessionTimeout = 200 * time.Millisecond
	cfg.MaxSessionTimeout = 20 * time.Second
	cfg.RaftTimeout = 100 * time.Millisecond
	cfg.ContainerCheckInterval = 200 * time.Millisecond
	cfg.MaxClientConns = 0 // every test client comes from one address
	cfg.Logger = logger(c.tb, id)
	cfg.ClusterKey = Key
	return cfg
}

// New starts voters+observers servers, the first bootstrapping the cluster
// and the others joining through it, and returns once each is in the raft
// configuration with its role and a leader leads. tweak, if not nil,
// changes each server's configuration before it starts.
func New(tb TB, voters, observers int, tweak func(*server.Config)) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, Net: memnet.New()}
	for i := 0; i < voters+observers; i++ {
		cfg := c.Config(fmt.Sprintf("s%d", i+1), i+1)
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			first := c.Servers[0]
			cfg.Peers = []server.Peer{{ID: first.ID(), RaftAddr: first.RaftAddr(), GRPCAddr: first.GRPCAddr()}}
			cfg.Observer = i >= voters
		}
		if tweak != nil {
			tweak(&cfg)
		}
		c.start(cfg)
	}
	c.WaitMembers(voters, observers)
	return c
}

func (c *Cluster) start(cfg server.Config) *server.Server {
	c.tb.Helper()
	s, err := server.New(cfg)
	if err != nil {
		c.tb.Fatalf("starting %s: %v", cfg.ID, err)
	}
	c.tb.Cleanup(func() { s.Close() })
	c.Servers = append(c.Servers, s)
	c.configs = append(c.configs, cfg)
	return s
}

// Kill stops server i at once (its clients lose their connection; its
// stores keep what it wrote).
func (c *Cluster) Kill(i int) { c.Servers[i].Close() }

// Restart stops server i if it runs and starts it again on its stores and
// addresses.
func (c *Cluster) Restart(i int) *server.Server {
	c.tb.Helper()
	c.Servers[i].Close()
	cfg := c.configs[i]
	cfg.GRPCAddr = c.Servers[i].GRPCAddr() // its clients find it again
	s, err := server.New(cfg)
	if err != nil {
		c.tb.Fatalf("restarting %s: %v", cfg.ID, err)
	}
	c.tb.Cleanup(func() { s.Close() })
	c.Servers[i], c.configs[i] = s, cfg
	return s
}

// Isolate cuts server i off from every other server (its clients still
// reach it); Heal undoes it.
func (c *Cluster) Isolate(i int) { c.Net.Isolate(c.Servers[i].ID()) }

// Partition splits the servers into groups (indexes) that cannot reach
// each other; servers named in no group form one more group.
func (c *Cluster) Partition(groups ...[]int) {
	var named [][]string
	for _, g := range groups {
		var ids []string
		for _, i := range g {
			ids = append(ids, c.Servers[i].ID())
		}
		named = append(named, ids)
	}
	c.Net.Partition(named...)
}

// Heal ends every cut.
func (c *Cluster) Heal() { c.Net.Heal() }

// WaitFor waits until cond holds, checking it again whenever any running
// server changes (role, leader, an applied entry), for at most limit; it
// reports whether cond held.
func (c *Cluster) WaitFor(limit time.Duration, cond func() bool) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}}
		for _, s := range c.Servers {
			if !s.Closed() {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Changed())})
			}
		}
		if cond() {
			return true
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			return cond()
		}
	}
}

// Leader waits for a leader among the running servers and returns its
// index.
func (c *Cluster) Leader() int {
	c.tb.Helper()
	leader := -1
	if !c.WaitFor(10*time.Second, func() bool {
		for i, s := range c.Servers {
			if !s.Closed() && s.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	}) {
		c.tb.Fatal("no leader within 10s")
	}
	return leader
}

// WaitMembers waits until a leader's configuration has the given numbers
// of voters and non-voters.
func (c *Cluster) WaitMembers(voters, observers int) {
	c.tb.Helper()
	var v, o []string
	if !c.WaitFor(20*time.Second, func() bool {
		for _, s := range c.Servers {
			if !s.Closed() && s.IsLeader() {
				var err error
				v, o, err = s.RaftConfiguration()
				return err == nil && len(v) == voters && len(o) == observers
			}
		}
		return false
	}) {
		c.tb.Fatalf("cluster has voters %v and non-voters %v, want %d and %d", v, o, voters, observers)
	}
}

// ZKAddrs are the ZooKeeper protocol addresses of the running servers.
func (c *Cluster) ZKAddrs() []string {
	var out []string
	for _, s := range c.Servers {
		if !s.Closed() {
			out = append(out, s.ZKAddr())
		}
	}
	return out
}

// Addrs are the gRPC addresses of the running servers.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Servers {
		if !s.Closed() {
			out = append(out, s.GRPCAddr())
		}
	}
	return out
}

// logger logs to the test's log when COORD_TEST_LOG is set, and nowhere
// otherwise (raft is chatty).
func logger(tb TB, id string) *slog.Logger {
	if os.Getenv("COORD_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := &tbWriter{tb: tb}
	tb.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("id", id)
}

type tbWriter struct {
	mu   sync.Mutex
	tb   TB
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(string(p))
	}
	return len(p), nil
}
