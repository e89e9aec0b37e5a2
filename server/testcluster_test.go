package server

// The cluster, PKI and watchdog helpers of this package's own tests. Other
// packages' tests use internal/testcluster (an in-process cluster on an
// in-memory network), internal/testpki and internal/watchdog; these stay
// here, in a test file, so that no test code ships in the product. The
// cluster is built on internal/servergroup, as internal/testcluster's is
// (this package's tests cannot import that one: it imports server).

import (
	"crypto/ecdsa"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/internal/memnet"
	"coord/internal/servergroup"
	"coord/internal/testpki"
	"coord/internal/watchdog"
)

// TestCluster is a cluster of real servers in this process. Their peer
// planes meet on an in-memory network (internal/memnet) and raft keeps its
// log, stable store and snapshots in memory, unless a test's tweak asks for
// the real thing (onTCP: raft over TCP on loopback, bbolt files and
// snapshots in the data directories) because the network or the disk is
// what it tests.
type TestCluster struct {
	// Servers, their configurations (Configs), Start and the waits
	// (Leader, WaitMembers, WaitFor), as internal/testcluster's.
	*servergroup.Group[*Server, Config]
	tb  testing.TB
	net *memnet.Network
}

// inMemory puts cfg's peer plane on net, as server n, and raft's stores in
// memory.
func inMemory(cfg *Config, net *memnet.Network, n int) {
	cfg.RaftAddr = fmt.Sprintf("127.77.0.%d:7000", n)
	cfg.PeerNetwork = net.Host(cfg.ID)
	cfg.Stores = &Stores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()}
	cfg.RaftTimeout = memRaftTimeout()
}

// memRaftTimeout is RaftTimeout on the in-memory network: no kernel, no
// fsync between the servers, so elections and joins can be quicker; under
// the race detector, whose servers are several times slower, the TCP
// clusters' 200 ms.
func memRaftTimeout() time.Duration {
	if raceDetector {
		return 200 * time.Millisecond
	}
	return 100 * time.Millisecond
}

// onTCP is a tweak for tests about the real network or disk: raft over TCP
// on loopback and its stores on disk.
func onTCP(cfg *Config) {
	cfg.RaftAddr, cfg.PeerNetwork, cfg.Stores = "127.0.0.1:0", nil, nil
	cfg.RaftTimeout = 200 * time.Millisecond
}

// TestClusterKey is the cluster key of every test server (testConfig): the
// servers of a test cluster prove membership with it. It is no secret.
var TestClusterKey = []byte("coord test cluster key, not a secret")

// testConfig returns a configuration with fast timings for loopback tests.
func testConfig(tb testing.TB, id string) Config {
	cfg := DefaultConfig()
	cfg.ID = id
	cfg.DataDir = tb.TempDir()
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.GossipAddr = "" // tests that want gossip turn it on
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ZKAddr = "127.0.0.1:0"
	cfg.Bootstrap = false
	cfg.Tick = 100 * time.Millisecond
	cfg.MinSessionTimeout = 200 * time.Millisecond
	cfg.MaxSessionTimeout = 20 * time.Second
	cfg.RaftTimeout = 200 * time.Millisecond
	cfg.ContainerCheckInterval = 200 * time.Millisecond
	// Tests open many sessions from one address (loopback); the limit is
	// tested on its own, as ZooKeeper's test configuration turns it off.
	cfg.MaxClientConns = 0
	cfg.Logger = servergroup.Logger(tb, id)
	cfg.ClusterKey = TestClusterKey
	return cfg
}

// emptyCluster is a cluster of no servers yet: a test starts its own
// (Start).
func emptyCluster(tb testing.TB) *TestCluster {
	return &TestCluster{tb: tb, Group: &servergroup.Group[*Server, Config]{TB: tb, New: New}}
}

// NewTestCluster starts voters+observers servers: the first bootstraps a
// cluster and the others join through it. It returns once every server is
// in the raft configuration with its role and a leader is elected.
func NewTestCluster(tb testing.TB, voters, observers int) *TestCluster {
	tb.Helper()
	return NewTestClusterWith(tb, voters, observers, nil)
}

// NewTestClusterWith is NewTestCluster with tweak applied to each server's
// configuration (after testConfig) before it starts.
func NewTestClusterWith(tb testing.TB, voters, observers int, tweak func(*Config)) *TestCluster {
	tb.Helper()
	c := emptyCluster(tb)
	c.net = memnet.New()
	for i := 0; i < voters+observers; i++ {
		cfg := testConfig(tb, fmt.Sprintf("s%d", i+1))
		inMemory(&cfg, c.net, i+1)
		if tweak != nil {
			tweak(&cfg)
		}
		if i == 0 {
			cfg.Bootstrap = true
		} else {
			first := c.Servers[0]
			cfg.Peers = []Peer{{ID: first.ID(), RaftAddr: first.RaftAddr(), GRPCAddr: first.GRPCAddr()}}
			cfg.Observer = i >= voters
		}
		c.Start(cfg)
	}
	c.WaitMembers(voters, observers)
	return c
}

// Add starts one more server that joins the cluster.
func (c *TestCluster) Add(observer bool) *Server {
	c.tb.Helper()
	cfg := testConfig(c.tb, fmt.Sprintf("s%d", len(c.Servers)+1))
	if c.Configs[0].PeerNetwork != nil {
		inMemory(&cfg, c.net, len(c.Servers)+1)
	}
	var peers []Peer
	for _, s := range c.Servers {
		peers = append(peers, Peer{ID: s.ID(), RaftAddr: s.RaftAddr(), GRPCAddr: s.GRPCAddr()})
	}
	cfg.Peers = peers
	cfg.Observer = observer
	return c.Start(cfg)
}

// Restart stops server i and starts it again from its data directory, on the
// same addresses.
func (c *TestCluster) Restart(i int) *Server {
	c.tb.Helper()
	old := c.Servers[i]
	cfg := c.Configs[i]
	cfg.GRPCAddr = old.GRPCAddr()
	if cfg.PeerNetwork == nil {
		cfg.RaftAddr = old.RaftAddr()
	}
	return c.Group.Restart(i, cfg, 50) // the ports may take a moment to free
}

// Isolate cuts server i off from the other servers, as a network partition
// does (its raft and server-to-server connections are closed and refused),
// while its clients still reach it. Heal undoes it.
func (c *TestCluster) Isolate(i int) { c.Servers[i].gate.isolate() }

// Heal reconnects server i to the others after Isolate.
func (c *TestCluster) Heal(i int) { c.Servers[i].gate.heal() }

// TestPKI is internal/testpki's CA with UseIn on this package's Config.
type TestPKI struct{ *testpki.PKI }

// NewTestPKI writes a CA and a server certificate into a temporary
// directory (testpki.New).
func NewTestPKI(tb testing.TB) *TestPKI { tb.Helper(); return &TestPKI{testpki.New(tb)} }

// UseIn turns TLS on in cfg with these files.
func (p *TestPKI) UseIn(cfg *Config) { p.PKI.UseIn(&cfg.TLSCert, &cfg.TLSKey, &cfg.TLSCA) }

func (p *TestPKI) issue(tb testing.TB, serial int64, name string, server bool) ([]byte, *ecdsa.PrivateKey) {
	tb.Helper()
	return p.Issue(tb, serial, name, server)
}

// RunWithWatchdog runs the package's tests from TestMain (watchdog.Run).
func RunWithWatchdog(m *testing.M, limit time.Duration) int { return watchdog.Run(m, limit) }
