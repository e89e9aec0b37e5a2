package compat

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coord/server"
)

// procCluster is a Cluster of real server processes that a test can crash
// and start again: coord processes built from ./cmd/coord, or ZooKeeper's
// JVMs.
type procCluster interface {
	Cluster
	// Start starts server i, after Kill, again with the same configuration,
	// ports and data directory. It returns as soon as the process runs,
	// without waiting for it to serve, so clients can race its start-up.
	Start(i int)
	// Restart crashes server i (SIGKILL, waiting until it is gone) and
	// starts it again as Start does.
	Restart(i int)
}

// procOpts places a process cluster's servers and sets its timings. The
// zero value gives loopback, ports the kernel had free, a
// 100 ms tick and session timeouts in [200 ms, 20 s], as the in-process
// coord (internal/testcluster's Config).
type procOpts struct {
	// netns[i], if set, is the network namespace server i runs in (ip
	// netns exec; see netLab).
	netns []string
	// hosts[i], if set, is the address server i listens on for everything,
	// with fixed ports (coordPorts, zkPorts): its namespace has them all to
	// itself.
	hosts []string
	// tick is coord's -tick and ZooKeeper's tickTime; when set, session
	// timeouts are both servers' defaults, [2, 20] ticks.
	tick time.Duration
	// raftTimeout is coord's -raft-timeout (0: 200 ms).
	raftTimeout time.Duration
	// initLimit and syncLimit are ZooKeeper's, in ticks (0: 50 and 20).
	initLimit, syncLimit int
	// jvmProps are more -D options for ZooKeeper's JVMs.
	jvmProps []string
	// coordArgs are more flags for coord; zooCfg more zoo.cfg lines for
	// ZooKeeper (after the defaults, which they override).
	coordArgs []string
	zooCfg    []string
	// dynamic gives ZooKeeper a dynamic configuration, as reconfig needs:
	// reconfigEnabled=true, standaloneEnabled=false and a
	// dynamicConfigFile of server.N=host:quorum:election:participant;host:clientPort
	// lines, which ZooKeeper rewrites on every reconfig and a restarted
	// server reads back. coord needs nothing (reconfig is on by default).
	dynamic bool
}

func (o procOpts) host(i int) string {
	if i < len(o.hosts) && o.hosts[i] != "" {
		return o.hosts[i]
	}
	return "127.0.0.1"
}

func (o procOpts) ns(i int) string {
	if i < len(o.netns) {
		return o.netns[i]
	}
	return ""
}

// inNetns is the command that runs name with args in network namespace ns
// ("" : this one). ip netns exec execs the command in its own process, so
// the process, its pid and its Pdeathsig are the server's.
func inNetns(ns, name string, args ...string) *exec.Cmd {
	if ns == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
}

// The fixed ports of a server that has its own address (procOpts.hosts).
var (
	coordPorts = [4]int{7000, 7001, 2181, 8080} // raft, gRPC, ZooKeeper, HTTP
	zkPorts    = [3]int{2181, 2888, 3888}       // client, quorum, election
)

// newProcClusterOpts is newProcCluster with servers placed and timed by o.
func newProcClusterOpts(t testing.TB, n int, o procOpts) procCluster {
	t.Helper()
	switch target() {
	case "coord":
		return newCoordProcs(t, n, o)
	case "zookeeper":
		return newZKClusterOpts(t, n, o)
	}
	t.Fatalf("%s=%q: want coord or zookeeper", targetEnv, target())
	return nil
}

// coordBinEnv names a prebuilt coord binary to run instead of building
// ./cmd/coord (say, one built from another commit).
const coordBinEnv = "COORD_COMPAT_COORD_BIN"

// The coord binary is built once per test binary, into a directory that
// TestMain removes.
var coordBin struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func coordBinary(t testing.TB) string {
	t.Helper()
	coordBin.once.Do(func() {
		if p := os.Getenv(coordBinEnv); p != "" {
			coordBin.path = p
			return
		}
		dir, err := os.MkdirTemp("", "coord-compat-bin-")
		if err != nil {
			coordBin.err = err
			return
		}
		coordBin.dir = dir
		bin := filepath.Join(dir, "coord")
		start := time.Now()
		if out, err := exec.Command("go", "build", "-o", bin, "coord/cmd/coord").CombinedOutput(); err != nil {
			coordBin.err = fmt.Errorf("go build coord/cmd/coord: %v\n%s", err, out)
			return
		}
		t.Logf("built %s in %v", bin, time.Since(start).Round(time.Millisecond))
		coordBin.path = bin
	})
	if coordBin.err != nil {
		t.Fatal(coordBin.err)
	}
	return coordBin.path
}

// removeCoordBinary removes what coordBinary built (from TestMain).
func removeCoordBinary() {
	if coordBin.dir != "" {
		os.RemoveAll(coordBin.dir)
	}
}

// coordProcs runs coord servers as real processes on loopback: raft, gRPC,
// ZooKeeper and HTTP ports of their own, no gossip, timings as the
// in-process coord's and ZooKeeper's (100 ms tick, session timeouts in
// [200 ms, 20 s]).
type coordProcs struct {
	t     testing.TB
	bin   string
	nodes []*coordProc
}

type coordProc struct {
	id                   string
	netns                string
	dir                  string
	raft, grpc, zk, http string
	args                 []string
	log                  string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

func newCoordProcs(t testing.TB, n int, o procOpts) *coordProcs {
	t.Helper()
	c := &coordProcs{t: t, bin: coordBinary(t)}
	dir := t.TempDir()
	var ports []int
	if len(o.hosts) == 0 {
		ports = freePorts(t, 4*n)
	}
	var peers []string
	for i := 0; i < n; i++ {
		addr := func(k int) string {
			if ports == nil {
				return fmt.Sprintf("%s:%d", o.host(i), coordPorts[k])
			}
			return fmt.Sprintf("127.0.0.1:%d", ports[4*i+k])
		}
		nd := &coordProc{id: fmt.Sprintf("s%d", i+1), dir: filepath.Join(dir, fmt.Sprintf("s%d", i+1)),
			netns: o.ns(i), raft: addr(0), grpc: addr(1), zk: addr(2), http: addr(3)}
		nd.log = filepath.Join(nd.dir, "server.log")
		c.nodes = append(c.nodes, nd)
		peers = append(peers, fmt.Sprintf("%s=%s,%s", nd.id, nd.raft, nd.grpc))
	}
	// One cluster key for all the servers (the peer plane's secret; a
	// server with -peers and no key refuses to start). Every namespace
	// sees the same file system.
	keyFile := filepath.Join(dir, "cluster.key")
	key, err := server.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, nd := range c.nodes {
		nd.args = []string{"-id", nd.id, "-data-dir", filepath.Join(nd.dir, "data"),
			"-raft-addr", nd.raft, "-grpc-addr", nd.grpc, "-zk-addr", nd.zk, "-http-addr", nd.http,
			"-gossip-addr", "", "-4lw-whitelist", "*", // every word, as ZooKeeper's zoo.cfg here
			"-cluster-key-file", keyFile}
		if o.tick == 0 {
			nd.args = append(nd.args, "-tick", "100ms", "-min-session-timeout", "200ms", "-max-session-timeout", "20s")
		} else {
			nd.args = append(nd.args, "-tick", o.tick.String())
		}
		raftTimeout := o.raftTimeout
		if raftTimeout == 0 {
			raftTimeout = 200 * time.Millisecond
		}
		nd.args = append(nd.args, "-raft-timeout", raftTimeout.String())
		if n > 1 {
			nd.args = append(nd.args, "-peers", strings.Join(peers, ";"), "-bootstrap")
		}
		nd.args = append(nd.args, o.coordArgs...)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.stop()
		}
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("coord server %s log (tail):\n%s", nd.id, logTail(nd.log, 6000))
			}
		}
	})
	for i := range c.nodes {
		c.Start(i)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, nd := range c.nodes {
		for {
			if h, err := nd.health(); err == nil && h.Healthy {
				break
			}
			if !nd.running() {
				t.Fatalf("coord server %s exited during start:\n%s", nd.id, logTail(nd.log, 3000))
			}
			if time.Now().After(deadline) {
				t.Fatalf("coord server %s not healthy after 30s:\n%s", nd.id, logTail(nd.log, 3000))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

func (c *coordProcs) Name() string      { return "coord" }
func (c *coordProcs) Size() int         { return len(c.nodes) }
func (c *coordProcs) Addr(i int) string { return c.nodes[i].zk }
func (c *coordProcs) Kill(i int)        { c.nodes[i].stop() }
func (c *coordProcs) Restart(i int)     { c.Kill(i); c.Start(i) }

// ConfigLine is server i's line in /zookeeper/config, after "server.N=":
// raftAddr:grpcPort:role;zkAddr (the gRPC port sits in ZooKeeper's
// election port slot).
func (c *coordProcs) ConfigLine(i int, role string) string {
	nd := c.nodes[i]
	_, grpcPort, _ := strings.Cut(nd.grpc, ":")
	return fmt.Sprintf("%s:%s:%s;%s", nd.raft, grpcPort, role, nd.zk)
}

func (c *coordProcs) Addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		if nd.running() {
			out = append(out, nd.zk)
		}
	}
	return out
}

func (c *coordProcs) Start(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.running() {
		c.t.Fatalf("coord server %s is already running", nd.id)
	}
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := inNetns(nd.netns, c.bin, nd.args...)
	fmt.Fprintf(logf, "=== test: starting %s at %s\n", strings.Join(cmd.Args, " "), time.Now().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test binary even if the test never gets to
	// its cleanup (a panic, a timeout).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		c.t.Fatalf("starting coord: %v", err)
	}
	done := make(chan struct{})
	nd.cmd, nd.done = cmd, done
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
}

func (c *coordProcs) Leader() int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for i, nd := range c.nodes {
			if !nd.running() {
				continue
			}
			if h, err := nd.health(); err == nil && h.Healthy && h.Role == "leader" {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatal("no coord leader within 30s")
	return -1
}

type coordHealth struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Leader  string `json:"leader"`
	Healthy bool   `json:"healthy"`
}

var healthClient = &http.Client{Timeout: time.Second}

func (nd *coordProc) health() (coordHealth, error) {
	var h coordHealth
	resp, err := healthClient.Get("http://" + nd.http + "/health")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

func (nd *coordProc) running() bool {
	if nd.cmd == nil {
		return false
	}
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// stop kills the server with SIGKILL (a crash: nothing is flushed or
// closed) and waits until it is gone.
func (nd *coordProc) stop() {
	if !nd.running() {
		return
	}
	nd.cmd.Process.Kill()
	select {
	case <-nd.done:
	case <-time.After(10 * time.Second):
	}
}

// logTail returns the last n bytes of a log file.
func logTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
