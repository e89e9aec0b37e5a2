package compat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coord/internal/fourletter"
	"coord/internal/freeport"
	"coord/internal/testcluster"
	"coord/server"
)

// Cluster is what a compatibility test needs of the servers under test: one
// test body runs against every implementation.
type Cluster interface {
	// Name is "coord" or "zookeeper".
	Name() string
	// Size is the number of servers, running or not.
	Size() int
	// Addrs returns the ZooKeeper protocol host:port of the running servers.
	Addrs() []string
	// Addr returns server i's host:port, running or not.
	Addr(i int) string
	// Kill stops server i (in-process coord: Server.Close, its stores
	// kept; coord processes and ZooKeeper: SIGKILL).
	Kill(i int)
	// Leader returns the index of the server that leads now (waiting for
	// one); a single server is its own leader.
	Leader() int
}

// The target is chosen by COORD_COMPAT_TARGET: "coord" (the default) or
// "zookeeper" (Apache ZooKeeper from Debian's zookeeper package).
const targetEnv = "COORD_COMPAT_TARGET"

func target() string {
	if t := os.Getenv(targetEnv); t != "" {
		return t
	}
	return "coord"
}

// newCluster starts n servers of the selected target for the test and stops
// them when it ends. coord's are in the test's process (internal/testcluster:
// raft between them on an in-memory network, in-memory raft stores, clients
// over loopback TCP); tweaks change their configuration (ZooKeeper's ignore
// them): testcluster.OnTCP puts raft on loopback TCP and its stores on disk,
// for a test that reads what ZooKeeper shows of those.
func newCluster(t testing.TB, n int, tweaks ...func(*server.Config)) Cluster {
	t.Helper()
	switch target() {
	case "coord":
		// Every four-letter word, as the ZooKeeper servers' zoo.cfg
		// (4lw.commands.whitelist=*); TestFourLetterWordsDefault tries
		// coord's default.
		return &coordCluster{tc: testcluster.New(t, n, 0, func(cfg *server.Config) {
			cfg.FourLetterWords = []string{"*"}
			for _, tweak := range tweaks {
				tweak(cfg)
			}
		})}
	case "zookeeper":
		return newZKCluster(t, n)
	}
	t.Fatalf("%s=%q: want coord or zookeeper", targetEnv, target())
	return nil
}

// coordCluster is an in-process coord cluster.
type coordCluster struct{ tc *testcluster.Cluster }

func (c *coordCluster) Name() string      { return "coord" }
func (c *coordCluster) Size() int         { return len(c.tc.Servers) }
func (c *coordCluster) Addrs() []string   { return c.tc.ZKAddrs() }
func (c *coordCluster) Addr(i int) string { return c.tc.Servers[i].ZKAddr() }
func (c *coordCluster) Kill(i int)        { c.tc.Kill(i) }
func (c *coordCluster) Leader() int       { return c.tc.Leader() }

// Apache ZooKeeper from Debian: /usr/share/java/zookeeper.jar (its manifest
// names its dependencies) started as real JVMs on loopback.
const (
	zkJar       = "/usr/share/java/zookeeper.jar"
	slf4jSimple = "/usr/share/java/slf4j-simple.jar" // server logs to stderr, kept in the test's log file
	zkCliPath   = "/usr/share/zookeeper/bin/zkCli.sh"
)

// zkTick is tickTime for the ZooKeeper servers, as the in-process coord's
// Tick, so that session timeouts negotiate alike ([200 ms, 20 s]).
const zkTick = 100 * time.Millisecond

type zkCluster struct {
	t     testing.TB
	dir   string
	opts  procOpts
	nodes []*zkNode
}

type zkNode struct {
	id               int
	dir              string
	host, netns      string
	clientPort       int
	quorum, election int
	cmd              *exec.Cmd
	log              string
	done             chan struct{}
}

func requireZooKeeper(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("java"); err != nil {
		t.Skipf("%s=zookeeper needs java (apt-get install default-jre-headless): %v", targetEnv, err)
	}
	if _, err := os.Stat(zkJar); err != nil {
		t.Skipf("%s=zookeeper needs Debian's zookeeper package (apt-get install zookeeper): %v", targetEnv, err)
	}
}

func newZKCluster(t testing.TB, n int) *zkCluster {
	t.Helper()
	return newZKClusterOpts(t, n, procOpts{})
}

// newZKClusterOpts is newZKCluster with the servers placed and timed by o
// (see procOpts).
func newZKClusterOpts(t testing.TB, n int, o procOpts) *zkCluster {
	t.Helper()
	requireZooKeeper(t)
	c := &zkCluster{t: t, dir: t.TempDir(), opts: o}
	var ports []int
	if len(o.hosts) == 0 {
		ports = freePorts(t, 3*n)
	}
	for i := 0; i < n; i++ {
		nd := &zkNode{id: i + 1, dir: filepath.Join(c.dir, fmt.Sprintf("zk%d", i+1)), host: o.host(i), netns: o.ns(i)}
		if ports == nil {
			nd.clientPort, nd.quorum, nd.election = zkPorts[0], zkPorts[1], zkPorts[2]
		} else {
			nd.clientPort, nd.quorum, nd.election = ports[3*i], ports[3*i+1], ports[3*i+2]
		}
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.stop()
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				b, _ := os.ReadFile(nd.log)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("ZooKeeper server %d log (tail):\n%s", nd.id, b)
			}
		}
	})
	for _, nd := range c.nodes {
		c.start(nd)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, nd := range c.nodes {
		for {
			out, _ := fourLetter(nd.addr(), "srvr", time.Second)
			if strings.Contains(out, "Mode: ") {
				break
			}
			select {
			case <-nd.done:
				t.Fatalf("ZooKeeper server %d exited during start; see %s", nd.id, nd.log)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("ZooKeeper server %d not serving after 60s: %q", nd.id, out)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return c
}

func (c *zkCluster) start(nd *zkNode) {
	c.t.Helper()
	data := filepath.Join(nd.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		c.t.Fatal(err)
	}
	cfgPath := filepath.Join(nd.dir, "zoo.cfg")
	// A dynamic configuration is ZooKeeper's to rewrite after a reconfig
	// (zoo.cfg then names zoo.cfg.dynamic.<version>): a restarted server
	// keeps it.
	if _, err := os.Stat(cfgPath); err != nil || !c.opts.dynamic {
		c.writeConfig(nd, cfgPath)
	}
	nd.log = filepath.Join(nd.dir, "server.log")
	// Appended to, so that a restarted server's log keeps what it said
	// before the crash.
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== test: starting ZooKeeper server %d at %s\n", nd.id, time.Now().Format(time.RFC3339Nano))
	cp := zkJar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.extendedTypesEnabled=true", // TTL nodes
		"-Dznode.container.checkIntervalMs=100", // containers and TTLs reaped promptly, as coord's test config
		"-Dzookeeper.admin.enableServer=false",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info"}
	args = append(args, c.opts.jvmProps...)
	args = append(args, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfgPath)
	nd.cmd = inNetns(nd.netns, "java", args...)
	nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
	// The JVM dies with the test binary even if the test never gets to its
	// cleanup (a panic, a timeout).
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nd.cmd.Start(); err != nil {
		c.t.Fatalf("starting ZooKeeper: %v", err)
	}
	done := make(chan struct{})
	nd.done = done
	go func(cmd *exec.Cmd) {
		cmd.Wait()
		logf.Close()
		close(done)
	}(nd.cmd)
}

// writeConfig writes server nd's zoo.cfg (and, for a dynamic
// configuration, its first zoo.cfg.dynamic) and myid.
func (c *zkCluster) writeConfig(nd *zkNode, cfgPath string) {
	c.t.Helper()
	data := filepath.Join(nd.dir, "data")
	var cfg bytes.Buffer
	tick, initLimit, syncLimit := zkTick, 50, 20
	if c.opts.tick != 0 {
		tick = c.opts.tick
	}
	if c.opts.initLimit != 0 {
		initLimit = c.opts.initLimit
	}
	if c.opts.syncLimit != 0 {
		syncLimit = c.opts.syncLimit
	}
	fmt.Fprintf(&cfg, "tickTime=%d\ninitLimit=%d\nsyncLimit=%d\n", tick.Milliseconds(), initLimit, syncLimit)
	fmt.Fprintf(&cfg, "dataDir=%s\n", data)
	if !c.opts.dynamic {
		fmt.Fprintf(&cfg, "clientPort=%d\nclientPortAddress=%s\n", nd.clientPort, nd.host)
	}
	if c.opts.tick == 0 {
		fmt.Fprintf(&cfg, "minSessionTimeout=200\nmaxSessionTimeout=20000\n")
	}
	fmt.Fprintf(&cfg, "admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n")
	for _, line := range c.opts.zooCfg {
		fmt.Fprintln(&cfg, line)
	}
	if c.opts.dynamic {
		var dyn bytes.Buffer
		for i, o := range c.nodes {
			fmt.Fprintf(&dyn, "server.%d=%s\n", o.id, c.ConfigLine(i, "participant"))
		}
		dynPath := cfgPath + ".dynamic"
		if err := os.WriteFile(dynPath, dyn.Bytes(), 0o644); err != nil {
			c.t.Fatal(err)
		}
		fmt.Fprintf(&cfg, "reconfigEnabled=true\nstandaloneEnabled=false\ndynamicConfigFile=%s\n", dynPath)
	} else if len(c.nodes) > 1 {
		for _, o := range c.nodes {
			fmt.Fprintf(&cfg, "server.%d=%s:%d:%d\n", o.id, o.host, o.quorum, o.election)
		}
	}
	if c.opts.dynamic || len(c.nodes) > 1 {
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", nd.id)), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// ConfigLine is server i's line in /zookeeper/config, after "server.N=":
// host:quorumPort:electionPort:role;clientHost:clientPort.
func (c *zkCluster) ConfigLine(i int, role string) string {
	nd := c.nodes[i]
	return fmt.Sprintf("%s:%d:%d:%s;%s", nd.host, nd.quorum, nd.election, role, nd.addr())
}

func (nd *zkNode) addr() string { return fmt.Sprintf("%s:%d", nd.host, nd.clientPort) }

func (nd *zkNode) running() bool {
	select {
	case <-nd.done:
		return false
	default:
		return nd.cmd != nil
	}
}

// stop kills the JVM (SIGKILL: an abrupt crash, as the tests want) and
// waits for it to go.
func (nd *zkNode) stop() {
	if nd.cmd == nil || nd.cmd.Process == nil {
		return
	}
	nd.cmd.Process.Kill()
	select {
	case <-nd.done:
	case <-time.After(10 * time.Second):
	}
}

func (c *zkCluster) Name() string      { return "zookeeper" }
func (c *zkCluster) Size() int         { return len(c.nodes) }
func (c *zkCluster) Addr(i int) string { return c.nodes[i].addr() }
func (c *zkCluster) Kill(i int)        { c.nodes[i].stop() }
func (c *zkCluster) Restart(i int)     { c.Kill(i); c.Start(i) }

// Start starts a killed server again with the same zoo.cfg, ports and data
// directory, without waiting for it to serve.
func (c *zkCluster) Start(i int) {
	c.t.Helper()
	if c.nodes[i].running() {
		c.t.Fatalf("ZooKeeper server %d is already running", c.nodes[i].id)
	}
	c.start(c.nodes[i])
}

func (c *zkCluster) Addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		if nd.running() {
			out = append(out, nd.addr())
		}
	}
	return out
}

func (c *zkCluster) Leader() int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, nd := range c.nodes {
			if !nd.running() {
				continue
			}
			out, _ := fourLetter(nd.addr(), "srvr", time.Second)
			if strings.Contains(out, "Mode: leader") || strings.Contains(out, "Mode: standalone") {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatal("no ZooKeeper leader within 30s")
	return -1
}

// freePorts returns n distinct loopback ports the kernel had free.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := freeport.Ports(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// fourLetter sends a four-letter word and returns everything the server
// writes before it closes the connection (timeout bounds the dial, and then
// the exchange).
func fourLetter(addr, cmd string, timeout time.Duration) (string, error) {
	return fourletter.Ask(context.Background(), addr, cmd, fourletter.Options{DialTimeout: timeout, Timeout: timeout})
}

// logSink routes a client library's log lines to the test's log while the
// test runs (COORD_TEST_LOG set) and drops them otherwise.
type logSink struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func newLogSink(t testing.TB) *logSink {
	s := &logSink{t: t}
	t.Cleanup(func() { s.mu.Lock(); s.done = true; s.mu.Unlock() })
	return s
}

func (s *logSink) Printf(format string, args ...any) {
	if os.Getenv("COORD_TEST_LOG") == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.t.Logf("go-zookeeper: "+format, args...)
	}
}
