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
// A test about the peer plane's real network or the real raft stores hands
// New the tweak OnTCP: raft over loopback TCP and raft's files on disk,
// with the same waits (such a cluster cannot be cut: Isolate and Partition
// fail it). Tests that are about the real process, the real disk or the
// real network (kill -9, fsync, iptables) keep using real processes
// (jepsen/, cmd/coord).
package testcluster

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"coord/internal/memnet"
	"coord/internal/servergroup"
	"coord/server"
)

// Key is the cluster key of every test cluster's servers. It is no secret.
var Key = []byte("coord test cluster key, not a secret")

// TB is the part of testing.TB a cluster uses (a package's TestMain can
// hand in its own, for a cluster shared by its tests).
type TB = servergroup.TB

// Cluster is a running in-process cluster: its servers (Servers), their
// configurations, and the waits on them (Leader, WaitMembers, WaitFor)
// come from servergroup.Group.
type Cluster struct {
	*servergroup.Group[*server.Server, server.Config]
	tb    TB
	Net   *memnet.Network
	tweak func(*server.Config)
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
	cfg.Logger = servergroup.Logger(c.tb, id)
	cfg.ClusterKey = Key
	return cfg
}

// New starts voters+observers servers, the first bootstrapping the cluster
// and the others joining through it, and returns once each is in the raft
// configuration with its role and a leader leads. tweak, if not nil,
// changes each server's configuration before it starts.
func New(tb TB, voters, observers int, tweak func(*server.Config)) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, Net: memnet.New(), tweak: tweak,
		Group: &servergroup.Group[*server.Server, server.Config]{TB: tb, New: server.New}}
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
		c.Start(cfg)
	}
	c.WaitMembers(voters, observers)
	return c
}

// OnTCP, as New's tweak (or called from one), puts a server's peer plane
// on loopback TCP (a port the kernel picks) and its raft log, stable
// store and snapshots in files under its data directory, as a coord
// process has them: for tests about the real network or the real stores.
// The cluster's Isolate and Partition then fail the test.
func OnTCP(cfg *server.Config) {
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.PeerNetwork = nil
	cfg.Stores = nil
}

// Add starts one more server (an observer, or a voter) that joins through
// the running servers, configured as New configured the others (its
// tweak too), and waits for it to be in the raft configuration with its
// role.
func (c *Cluster) Add(observer bool) *server.Server {
	c.tb.Helper()
	n := len(c.Servers) + 1
	cfg := c.Config(fmt.Sprintf("s%d", n), n)
	for _, s := range c.Servers {
		if !s.Closed() {
			cfg.Peers = append(cfg.Peers, server.Peer{ID: s.ID(), RaftAddr: s.RaftAddr(), GRPCAddr: s.GRPCAddr()})
		}
	}
	cfg.Observer = observer
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	voters, observers := c.Members()
	s := c.Start(cfg)
	if observer {
		observers++
	} else {
		voters++
	}
	c.WaitMembers(voters, observers)
	return s
}

// ConfigOf is the configuration server i runs with (after New's tweak; its
// addresses as configured, which may end in :0: the server's methods say
// where it listens).
func (c *Cluster) ConfigOf(i int) server.Config { return c.Configs[i] }

// Kill stops server i at once (its clients lose their connection; its
// stores keep what it wrote).
func (c *Cluster) Kill(i int) { c.Servers[i].Close() }

// Restart stops server i if it runs and starts it again on its stores and
// addresses.
func (c *Cluster) Restart(i int) *server.Server {
	c.tb.Helper()
	old := c.Servers[i]
	cfg := c.Configs[i]
	cfg.GRPCAddr = old.GRPCAddr() // its clients find it again
	tries := 1
	if cfg.PeerNetwork == nil { // OnTCP: the others know its port
		cfg.RaftAddr = old.RaftAddr()
		tries = 50
	}
	return c.Group.Restart(i, cfg, tries)
}

// Isolate cuts server i off from every other server (its clients still
// reach it); Heal undoes it.
func (c *Cluster) Isolate(i int) {
	c.tb.Helper()
	c.onMemnet("Isolate")
	c.Net.Isolate(c.Servers[i].ID())
}

// Partition splits the servers into groups (indexes) that cannot reach
// each other; servers named in no group form one more group.
func (c *Cluster) Partition(groups ...[]int) {
	c.tb.Helper()
	c.onMemnet("Partition")
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

// onMemnet fails the test if a server's peer plane is not on the cluster's
// in-memory network (OnTCP): no cut could reach it.
func (c *Cluster) onMemnet(what string) {
	c.tb.Helper()
	for _, cfg := range c.Configs {
		if cfg.PeerNetwork == nil {
			c.tb.Fatalf("testcluster: %s on a cluster whose peer plane is on TCP (OnTCP, server %s): only the in-memory network can be cut", what, cfg.ID)
		}
	}
}

// Heal ends every cut.
func (c *Cluster) Heal() { c.Net.Heal() }
