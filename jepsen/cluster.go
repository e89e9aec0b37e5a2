package jepsen

import (
	"context"
	"coord/internal/freeport"
	"coord/vocab"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ClusterConfig says how to run the servers.
type ClusterConfig struct {
	// Bin is the coord binary (BuildCoord makes one).
	Bin string
	// Dir holds each server's data directory and log.
	Dir string
	// Voters and Observers count the servers.
	Voters, Observers int
	// Lab, if set, places server i in network namespace Lab.NS(i) with its
	// own address and fixed ports; otherwise every server is on loopback on
	// ports the kernel had free.
	Lab *Lab
	// Proxy, if set (and no Lab), stands between the servers: server i's
	// raft and gRPC are reached through the proxy's addresses for it, and
	// its connections to the others come from proxySource(i).
	Proxy *Proxy
	// Env is more environment for the servers (say, COORD_PLANTED).
	Env []string
	// Args are more coord flags.
	Args []string
	Log  *slog.Logger
}

// Cluster is a set of real coord processes the nemeses can kill, restart,
// pause and cut apart.
type Cluster struct {
	cfg   ClusterConfig
	nodes []*node
	// keyFile is the cluster key every server proves membership with on
	// the peer plane (-cluster-key-file): the cluster's servers, the ones
	// a nemesis adds and every restart all get it.
	keyFile string

	hookMu  sync.Mutex
	up      bool        // StartCluster is done: later starts are restarts
	onStart []func(int) // told of each restart
}

// OnStart registers f to be called, on a goroutine of its own, with the
// index of each server started again once the cluster is up (a nemesis's
// restart or heal), as soon as its process runs: workloads use it to
// reconnect clients to a restarted server at once.
func (c *Cluster) OnStart(f func(server int)) {
	c.hookMu.Lock()
	c.onStart = append(c.onStart, f)
	c.hookMu.Unlock()
}

type node struct {
	id                   string
	ns                   string
	dir, log             string
	raft, grpc, zk, http string
	// raftListen is where raft listens when raft (its address in the raft
	// configuration) is a proxy's.
	raftListen string
	args       []string
	// wrap runs before the binary (inside the namespace), e.g. unshare
	// --time for the clock nemesis.
	wrap []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// BuildCoord builds ./cmd/coord (with the given build tags) into dir and
// returns the binary's path.
func BuildCoord(ctx context.Context, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "coord")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	args = append(args, "coord/cmd/coord")
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

// The fixed ports of a server that has its own address in a namespace.
var nsPorts = [4]int{7000, 7001, 2181, 8080} // raft, gRPC, ZooKeeper, HTTP

// StartCluster starts the servers and waits (bounded by ctx) until every one
// reports healthy. On error nothing it started is left running.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	n := cfg.Voters + cfg.Observers
	if cfg.Voters < 1 {
		return nil, errors.New("jepsen: a cluster needs at least one voter")
	}
	if cfg.Lab != nil && cfg.Lab.Size() < n {
		return nil, fmt.Errorf("jepsen: lab has %d namespaces for %d servers", cfg.Lab.Size(), n)
	}
	c := &Cluster{cfg: cfg, keyFile: filepath.Join(cfg.Dir, "cluster.key")}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := writeClusterKey(c.keyFile); err != nil {
		return nil, err
	}
	var ports []int
	if cfg.Lab == nil {
		var err error
		if ports, err = freeport.Ports(4 * n); err != nil {
			return nil, err
		}
	}
	var peers []string
	for i := 0; i < n; i++ {
		addr := func(k int) string {
			if ports == nil {
				return fmt.Sprintf("%s:%d", cfg.Lab.Host(i), nsPorts[k])
			}
			return fmt.Sprintf("127.0.0.1:%d", ports[4*i+k])
		}
		nd := &node{id: fmt.Sprintf("s%d", i+1), dir: filepath.Join(cfg.Dir, fmt.Sprintf("s%d", i+1)),
			raft: addr(0), grpc: addr(1), zk: addr(2), http: addr(3)}
		if cfg.Lab != nil {
			nd.ns = cfg.Lab.NS(i)
		}
		nd.log = filepath.Join(cfg.Dir, nd.id+".log")
		c.nodes = append(c.nodes, nd)
		peerGRPC := nd.grpc
		if cfg.Proxy != nil && cfg.Lab == nil {
			praft, pgrpc, err := cfg.Proxy.Target(i, nd.raft, nd.grpc)
			if err != nil {
				return nil, err
			}
			nd.raftListen, nd.raft, peerGRPC = nd.raft, praft, pgrpc
		}
		spec := fmt.Sprintf("%s=%s,%s", nd.id, nd.raft, peerGRPC)
		if i >= cfg.Voters {
			spec += ",observer"
		}
		peers = append(peers, spec)
	}
	for i, nd := range c.nodes {
		raftAddr := nd.raft
		if nd.raftListen != "" {
			raftAddr = nd.raftListen
		}
		nd.args = []string{"-id", nd.id, "-data-dir", c.DataDir(i),
			"-raft-addr", raftAddr, "-grpc-addr", nd.grpc, "-zk-addr", nd.zk, "-http-addr", nd.http,
			"-gossip-addr", "", "-tick", "200ms", "-min-session-timeout", "400ms", "-max-session-timeout", "20s",
			"-raft-timeout", "300ms", "-peers", strings.Join(peers, ";"), "-cluster-key-file", c.keyFile,
			"-super-digest", vocab.Digest(adminUserPassword),
			// A snapshot every half to one MiB of log: under the runs'
			// load the servers write snapshots and compact their logs
			// every few seconds, so the faults meet them.
			"-snapshot-log-bytes", "1048576"}
		if i >= cfg.Voters {
			nd.args = append(nd.args, "-observer")
		} else {
			nd.args = append(nd.args, "-bootstrap")
		}
		if nd.raftListen != "" {
			nd.args = append(nd.args, "-raft-advertise", nd.raft, "-peer-source-ip", proxySource(i))
		}
		nd.args = append(nd.args, cfg.Args...)
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			return nil, err
		}
	}
	for i := range c.nodes {
		if err := c.Start(i); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		c.Close()
		return nil, err
	}
	c.hookMu.Lock()
	c.up = true
	c.hookMu.Unlock()
	return c, nil
}

// The runner's admin identity: the membership nemesis's Admin calls
// (add, remove, move leader) send it, and every server has it as its
// -super-digest. Not a secret: the servers listen on loopback or in the
// lab's namespaces.
const adminUserPassword = "jepsen:jepsen-admin"

// writeClusterKey writes a new cluster key to path as `coord keygen -o`
// does (base64 of 32 random bytes, mode 0600), or keeps the one there (a
// cluster started again on the same directory, whose data its servers
// keep too).
func writeClusterKey(path string) error {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("jepsen: cluster key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jepsen: cluster key: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key[:]) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("jepsen: cluster key: %w", err)
	}
	return f.Close()
}

// Size is the number of servers.
func (c *Cluster) Size() int { return len(c.nodes) }

// Voters is the number of voting servers (the first ones).
func (c *Cluster) Voters() int { return c.cfg.Voters }

// ID is server i's id.
func (c *Cluster) ID(i int) string { return c.nodes[i].id }

// Addr is server i's ZooKeeper address.
func (c *Cluster) Addr(i int) string { return c.nodes[i].zk }

// Addrs are all servers' ZooKeeper addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.zk)
	}
	return out
}

// GRPCAddrs are all servers' gRPC addresses (coord's Go client).
func (c *Cluster) GRPCAddrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.grpc)
	}
	return out
}

// LogPath is server i's log file (every start appends to it).
func (c *Cluster) LogPath(i int) string { return c.nodes[i].log }

// DataDir is server i's data directory.
func (c *Cluster) DataDir(i int) string { return filepath.Join(c.nodes[i].dir, "data") }

// Start starts server i (again) with its configuration, ports and data. It
// returns once the process runs, without waiting for it to serve.
func (c *Cluster) Start(i int) error { return c.startNode(c.nodes[i]) }

// startWith starts server i with its flags as edit changes them, this
// time only.
func (c *Cluster) startWith(i int, edit func(args []string) []string) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	args := nd.args
	nd.args = edit(slices.Clone(args))
	nd.mu.Unlock()
	err := c.startNode(nd)
	nd.mu.Lock()
	nd.args = args
	nd.mu.Unlock()
	return err
}

func (c *Cluster) startNode(nd *node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.runningLocked() {
		return fmt.Errorf("jepsen: server %s is already running", nd.id)
	}
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	argv := append(append(append([]string{}, nd.wrap...), c.cfg.Bin), nd.args...)
	if nd.ns != "" {
		// ip netns exec (and unshare) exec the command: the pid is coord's own.
		argv = append([]string{"ip", "netns", "exec", nd.ns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), c.cfg.Env...)
	fmt.Fprintf(logf, "=== jepsen: starting %s at %s\n", strings.Join(cmd.Args, " "), time.Now().Format(time.RFC3339Nano))
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the runner even if it never gets to Close.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("jepsen: starting %s: %w", nd.id, err)
	}
	done := make(chan struct{})
	nd.cmd, nd.done, nd.paused = cmd, done, false
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()
	i := slices.Index(c.nodes, nd) // -1 for a server a nemesis added
	c.hookMu.Lock()
	if c.up && i >= 0 {
		for _, f := range c.onStart {
			go f(i)
		}
	}
	c.hookMu.Unlock()
	return nil
}

// Kill crashes server i with SIGKILL (nothing flushed or closed) and waits
// until it is gone. A paused server is killed too.
func (c *Cluster) Kill(i int) {
	nd := c.nodes[i]
	nd.mu.Lock()
	if !nd.runningLocked() {
		nd.mu.Unlock()
		return
	}
	nd.cmd.Process.Kill()
	done := nd.done
	nd.paused = false
	nd.mu.Unlock()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		c.cfg.Log.Warn("server did not exit after SIGKILL", "server", nd.id)
	}
}

// sendKill sends server i SIGKILL without waiting for it to exit (Kill
// waits): a process blocked on a filesystem request exits only once the
// request is answered.
func (c *Cluster) sendKill(i int) {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.runningLocked() {
		nd.cmd.Process.Kill()
	}
}

// Running reports whether server i's process is alive (paused counts).
func (c *Cluster) Running(i int) bool {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.runningLocked()
}

// Pause stops server i with SIGSTOP; Resume continues it with SIGCONT.
func (c *Cluster) Pause(i int) error  { return c.signal(i, syscall.SIGSTOP, true) }
func (c *Cluster) Resume(i int) error { return c.signal(i, syscall.SIGCONT, false) }

func (c *Cluster) signal(i int, sig syscall.Signal, paused bool) error {
	nd := c.nodes[i]
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if !nd.runningLocked() {
		return fmt.Errorf("jepsen: server %s is not running", nd.id)
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		return err
	}
	nd.paused = paused
	return nil
}

func (nd *node) runningLocked() bool {
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

// Close resumes and kills every server. It is safe to call more than once.
func (c *Cluster) Close() {
	for i := range c.nodes {
		c.Resume(i)
		c.Kill(i)
	}
}

// Health is what a server's /health says.
type Health struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Leader  string `json:"leader"`
	Healthy bool   `json:"healthy"`
}

var healthClient = &http.Client{Timeout: 500 * time.Millisecond}

// Health asks server i for its /health. A paused or dead server errs.
func (c *Cluster) Health(ctx context.Context, i int) (Health, error) {
	return getHealth(ctx, c.nodes[i].http)
}

// getHealth asks the server whose HTTP port is at addr for its /health.
func getHealth(ctx context.Context, addr string) (Health, error) {
	var h Health
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// Leader returns the index of the server that says it is the leader, or -1
// when none does right now.
func (c *Cluster) Leader(ctx context.Context) int { return leaderOf(ctx, len(c.nodes), c.Health) }

// leaderOf is the index of the first of n servers whose health (asked
// through health) says it leads, or -1.
func leaderOf(ctx context.Context, n int, health func(context.Context, int) (Health, error)) int {
	for i := 0; i < n; i++ {
		if h, err := health(ctx, i); err == nil && h.Healthy && h.Role == "leader" {
			return i
		}
	}
	return -1
}

// WaitLeader waits, bounded by ctx, for a leader.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	for {
		if l := c.Leader(ctx); l >= 0 {
			return l, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("jepsen: no leader: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// WaitHealthy waits, bounded by ctx, until every server reports healthy.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	for i, nd := range c.nodes {
		for {
			if h, err := c.Health(ctx, i); err == nil && h.Healthy {
				break
			}
			if !c.Running(i) {
				return fmt.Errorf("jepsen: server %s exited:\n%s", nd.id, LogTail(nd.log, 3000))
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("jepsen: server %s not healthy: %w\n%s", nd.id, ctx.Err(), LogTail(nd.log, 3000))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// LogTail returns the last n bytes of a file.
func LogTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
