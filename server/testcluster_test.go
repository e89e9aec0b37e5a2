package server

// The cluster, PKI and watchdog helpers of this package's own tests. Other
// packages' tests use internal/testcluster (an in-process cluster on an
// in-memory network), internal/testpki and internal/watchdog; these stay
// here, in a test file, so that no test code ships in the product.

import (
	"crypto/ecdsa"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"coord/internal/memnet"
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
	tb      testing.TB
	net     *memnet.Network
	Servers []*Server
	configs []Config
}

// inMemory puts cfg's peer plane on net, as server n, and raft's stores in
// memory.
func inMemory(cfg *Config, net *memnet.Network, n int) {
	cfg.RaftAddr = fmt.Sprintf("127.77.0.%d:7000", n)
	cfg.PeerNetwork = net.Host(cfg.ID)
	cfg.Stores = &Stores{Log: raft.NewInmemStore(), Stable: raft.NewInmemStore(), Snapshots: raft.NewInmemSnapshotStore()}
}

// onTCP is a tweak for tests about the real network or disk: raft over TCP
// on loopback and its stores on disk.
func onTCP(cfg *Config) {
	cfg.RaftAddr, cfg.PeerNetwork, cfg.Stores = "127.0.0.1:0", nil, nil
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
	cfg.Logger = testLogger(tb, id)
	cfg.ClusterKey = TestClusterKey
	return cfg
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
	c := &TestCluster{tb: tb, net: memnet.New()}
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
		c.start(cfg)
	}
	c.WaitMembers(voters, observers)
	return c
}

func (c *TestCluster) start(cfg Config) *Server {
	c.tb.Helper()
	s, err := New(cfg)
	if err != nil {
		c.tb.Fatalf("starting %s: %v", cfg.ID, err)
	}
	c.tb.Cleanup(func() { s.Close() })
	c.Servers = append(c.Servers, s)
	c.configs = append(c.configs, cfg)
	return s
}

// Add starts one more server that joins the cluster.
func (c *TestCluster) Add(observer bool) *Server {
	c.tb.Helper()
	cfg := testConfig(c.tb, fmt.Sprintf("s%d", len(c.Servers)+1))
	if c.configs[0].PeerNetwork != nil {
		inMemory(&cfg, c.net, len(c.Servers)+1)
	}
	var peers []Peer
	for _, s := range c.Servers {
		peers = append(peers, Peer{ID: s.ID(), RaftAddr: s.RaftAddr(), GRPCAddr: s.GRPCAddr()})
	}
	cfg.Peers = peers
	cfg.Observer = observer
	return c.start(cfg)
}

// Restart stops server i and starts it again from its data directory, on the
// same addresses.
func (c *TestCluster) Restart(i int) *Server {
	c.tb.Helper()
	old := c.Servers[i]
	cfg := c.configs[i]
	cfg.GRPCAddr = old.GRPCAddr()
	if cfg.PeerNetwork == nil {
		cfg.RaftAddr = old.RaftAddr()
	}
	old.Close()
	var s *Server
	var err error
	for try := 0; try < 50; try++ { // the ports may take a moment to free
		if s, err = New(cfg); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		c.tb.Fatalf("restarting %s: %v", cfg.ID, err)
	}
	c.tb.Cleanup(func() { s.Close() })
	c.Servers[i], c.configs[i] = s, cfg
	return s
}

// waitFor waits until cond holds, re-checking it whenever any server's
// state changes (raft's role or leader, an applied entry; see
// replica.Changed), for at most limit; it reports whether cond held.
func (c *TestCluster) waitFor(limit time.Duration, cond func() bool) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		// Take the channels before checking: a change after the check
		// closes one of them.
		cases := make([]reflect.SelectCase, 0, len(c.Servers)+1)
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)})
		for _, s := range c.Servers {
			if !s.isClosed() {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.rep.Changed())})
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

// Leader waits for a leader among the running servers and returns its index.
func (c *TestCluster) Leader() int {
	c.tb.Helper()
	leader := -1
	found := c.waitFor(10*time.Second, func() bool {
		for i, s := range c.Servers {
			if !s.isClosed() && s.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	})
	if !found {
		c.tb.Fatal("no leader within 10s")
	}
	return leader
}

// WaitMembers waits until the leader's configuration has the given numbers
// of voters and non-voters.
func (c *TestCluster) WaitMembers(voters, observers int) {
	c.tb.Helper()
	var v, o int
	ok := c.waitFor(20*time.Second, func() bool {
		v, o = 0, 0
		var l *Server
		for _, s := range c.Servers {
			if !s.isClosed() && s.IsLeader() {
				l = s
			}
		}
		if l == nil {
			return false
		}
		servers, err := l.rep.Configuration()
		if err != nil {
			return false
		}
		for _, srv := range servers {
			if srv.Voter {
				v++
			} else {
				o++
			}
		}
		return v == voters && o == observers
	})
	if !ok {
		c.tb.Fatalf("cluster has %d voters and %d non-voters, want %d and %d", v, o, voters, observers)
	}
}

// ZKAddrs returns the ZooKeeper protocol addresses of the running servers.
func (c *TestCluster) ZKAddrs() []string {
	var out []string
	for _, s := range c.Servers {
		if !s.isClosed() {
			out = append(out, s.ZKAddr())
		}
	}
	return out
}

// Addrs returns the gRPC addresses of the running servers.
func (c *TestCluster) Addrs() []string {
	var out []string
	for _, s := range c.Servers {
		if !s.isClosed() {
			out = append(out, s.GRPCAddr())
		}
	}
	return out
}

// Isolate cuts server i off from the other servers, as a network partition
// does (its raft and server-to-server connections are closed and refused),
// while its clients still reach it. Heal undoes it.
func (c *TestCluster) Isolate(i int) { c.Servers[i].gate.isolate() }

// Heal reconnects server i to the others after Isolate.
func (c *TestCluster) Heal(i int) { c.Servers[i].gate.heal() }

// testLogger logs to the test's log when COORD_TEST_LOG is set, and nowhere
// otherwise (raft is chatty); it stops when the test ends.
func testLogger(tb testing.TB, id string) *slog.Logger {
	if os.Getenv("COORD_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := &tbWriter{tb: tb}
	tb.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("id", id)
}

type tbWriter struct {
	mu   sync.Mutex
	tb   testing.TB
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
