package recipes_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coord/client"
	"coord/internal/testcluster"
	"coord/internal/zkproc"
	"coord/recipes"
	"coord/recipes/coordconn"
	"coord/recipes/zkconn"
)

// cluster is what a recipe test needs of the servers under test, so that
// one test body runs on coord and on Apache ZooKeeper.
type cluster interface {
	// Name is "coord" or "zookeeper".
	Name() string
	// connect opens a session on the cluster that ends with the test.
	connect(t testing.TB, o connOpts) recipes.Conn
	// kill stops server i abruptly.
	kill(i int)
	// size is the number of servers.
	size() int
	// serverOf is the index of the server a session is attached to.
	serverOf(t testing.TB, c recipes.Conn) int
}

// connOpts shape one session.
type connOpts struct {
	// timeout is the session timeout (default 10s).
	timeout time.Duration
	// proxied routes the session through proxies that the test can freeze
	// (to make the session expire).
	proxied *proxySet
	// server is the index of the server to try first (-1: the next in
	// turn, so that sessions spread over the servers).
	server int
}

func defaultConn() connOpts { return connOpts{server: -1} }

// ctxT is a context that ends with the test, with a generous bound.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testRoot is a path unique to the test.
func testRoot(t testing.TB) string {
	return "/" + strings.NewReplacer("/", "_", " ", "_", "#", "_").Replace(t.Name())
}

var rotor atomic.Int64

// rotate returns addrs starting at server i (i < 0: the next in turn).
func rotate(addrs []string, i int) []string {
	if i < 0 {
		i = int(rotor.Add(1))
	}
	i %= len(addrs)
	return append(append([]string(nil), addrs[i:]...), addrs[:i]...)
}

func testLogger() *slog.Logger {
	if os.Getenv("COORD_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// --- coord, in process ---

type coordCluster struct{ tc *testcluster.Cluster }

func (c *coordCluster) Name() string { return "coord" }
func (c *coordCluster) size() int    { return len(c.tc.Servers) }
func (c *coordCluster) kill(i int)   { c.tc.Servers[i].Close() }

func (c *coordCluster) connect(t testing.TB, o connOpts) recipes.Conn {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 15 * time.Second
	}
	addrs := c.tc.Addrs()
	if o.proxied != nil {
		addrs = o.proxied.addrs(t, addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := coordconn.Connect(ctx, rotate(addrs, o.server), client.WithSessionTimeout(o.timeout),
		client.WithShuffle(false), client.WithBackoff(5*time.Millisecond, 100*time.Millisecond),
		client.WithLogger(testLogger()))
	if err != nil {
		t.Fatalf("coord connect: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn
}

// --- Apache ZooKeeper, as processes ---

type zkClusterB struct{ zc *zkproc.Ensemble }

func (c *zkClusterB) Name() string { return "zookeeper" }
func (c *zkClusterB) size() int    { return len(c.zc.Servers) }
func (c *zkClusterB) kill(i int)   { c.zc.Servers[i].Kill() }

func (c *zkClusterB) connect(t testing.TB, o connOpts) recipes.Conn {
	t.Helper()
	if o.timeout == 0 {
		o.timeout = 15 * time.Second
	}
	addrs := c.zc.Addrs()
	if o.proxied != nil {
		addrs = o.proxied.addrs(t, addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := zkconn.Connect(ctx, rotate(addrs, o.server), zkconn.Options{SessionTimeout: o.timeout, Logger: testLogger()})
	if err != nil {
		t.Fatalf("zookeeper connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// --- shared clusters, started once per test binary ---

// mainTB lets clusters outlive single tests: the shared clusters are
// stopped by TestMain.
type mainTB struct {
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
}

func (m *mainTB) Helper()                         {}
func (m *mainTB) Fatal(args ...any)               { panic(fmt.Sprint(args...)) }
func (m *mainTB) Fatalf(format string, a ...any)  { panic(fmt.Sprintf(format, a...)) }
func (m *mainTB) Log(args ...any)                 {}
func (m *mainTB) Logf(format string, args ...any) {}
func (m *mainTB) Skipf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (m *mainTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}
func (m *mainTB) TempDir() string {
	d, err := os.MkdirTemp("", "coord-recipes-")
	if err != nil {
		panic(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dirs = append(m.dirs, d)
	return d
}

func (m *mainTB) stop() {
	m.mu.Lock()
	fs, dirs := m.cleanups, m.dirs
	m.cleanups, m.dirs = nil, nil
	m.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

var shared struct {
	mainTB
	coordOnce, zkOnce sync.Once
	coord             cluster
	zk                cluster
	zkErr             string
}

func sharedCoord(t testing.TB) cluster {
	shared.coordOnce.Do(func() {
		shared.coord = &coordCluster{tc: testcluster.New(&shared.mainTB, 3, 0, nil)}
	})
	return shared.coord
}

func sharedZK(t testing.TB) cluster {
	t.Helper()
	if why := zkMissing(); why != "" {
		t.Skip(why)
	}
	shared.zkOnce.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				shared.zkErr = fmt.Sprint(r)
			}
		}()
		shared.zk = &zkClusterB{zc: newZKCluster(&shared.mainTB, 3)}
	})
	if shared.zk == nil {
		t.Fatalf("starting ZooKeeper: %s", shared.zkErr)
	}
	return shared.zk
}

// ownCoord and ownZK start a cluster for one test (one that kills
// servers).
func ownCoord(t *testing.T) cluster { return &coordCluster{tc: testcluster.New(t, 3, 0, nil)} }

func ownZK(t *testing.T) cluster {
	t.Helper()
	if why := zkMissing(); why != "" {
		t.Skip(why)
	}
	return &zkClusterB{zc: newZKCluster(t, 3)}
}

// both runs body against coord and against ZooKeeper, as subtests.
func both(t *testing.T, body func(t *testing.T, c cluster)) {
	t.Run("coord", func(t *testing.T) { body(t, sharedCoord(t)) })
	t.Run("zookeeper", func(t *testing.T) { body(t, sharedZK(t)) })
}

// bothOwn is both with a cluster of the test's own.
func bothOwn(t *testing.T, body func(t *testing.T, c cluster)) {
	t.Run("coord", func(t *testing.T) { body(t, ownCoord(t)) })
	t.Run("zookeeper", func(t *testing.T) { body(t, ownZK(t)) })
}

// serverOf returns the index of the server a session is attached to.
func (c *coordCluster) serverOf(t testing.TB, conn recipes.Conn) int {
	t.Helper()
	addr := conn.(*coordconn.Conn).Client().Server()
	for i, s := range c.tc.Servers {
		if s.GRPCAddr() == addr {
			return i
		}
	}
	t.Fatalf("session on unknown server %s", addr)
	return -1
}

func (c *zkClusterB) serverOf(t testing.TB, conn recipes.Conn) int {
	t.Helper()
	addr := conn.(*zkconn.Conn).ZK().Server()
	for i, nd := range c.zc.Servers {
		if nd.Addr == addr {
			return i
		}
	}
	t.Fatalf("session on unknown server %s", addr)
	return -1
}
