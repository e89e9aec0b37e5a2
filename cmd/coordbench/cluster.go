package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"coord/api"
)

// cluster is a loopback cluster of real coord processes, started as
// `coord local` starts its voters: ids s1..sN, every server told of the
// others with -peers, all bootstrapping together (s2..sN also -join s1's
// gossip), each with a fresh data directory and all with one cluster key
// (-cluster-key-file, if the binary has it). Server i listens for raft on
// base+i, gRPC on base+100+i, gossip on base+200+i, HTTP on base+300+i and,
// if the binary has -zk-addr, ZooKeeper's protocol on base+400+i.
// Observers (-observers) come after the voters, as `coord local` starts
// them: -observer, no bootstrap, marked ",observer" in everyone's -peers.
// Every process is killed when the cluster stops, and coordbench stops it on
// every way out (see run).
type cluster struct {
	bin      string
	dir      string
	voters   int      // servers 1..voters vote; the rest are observers
	logLevel string   // the servers' -log-level
	extra    []string // more flags for every server
	zkFlag   bool     // the binary takes -zk-addr (the ZooKeeper wire protocol port)
	pprof    bool     // the binary serves /debug/pprof/ only with -pprof (liveHeap reads it)
	keyFile  string   // the cluster key every server proves membership with (-cluster-key-file; "": the binary has no such flag)
	super    string   // the superuser's user:password for admin calls ("": the binary has no -super-digest)
	digest   string   // its -super-digest value
	base     int
	procs    []*proc
	rebuild  []bool // start server i with -rebuild, once (wipe)
	admin    []api.AdminClient
	conns    []*grpc.ClientConn
	log      io.Writer // progress lines
}

// proc is one server process; it is replaced by a new one on restart.
type proc struct {
	id      int // 1-based
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	killed  bool          // by coordbench (kill or stop), so its exit is expected
	mu      sync.Mutex
	state   *os.ProcessState
}

func (c *cluster) raftAddr(i int) string   { return fmt.Sprintf("127.0.0.1:%d", c.base+i) }
func (c *cluster) grpcAddr(i int) string   { return fmt.Sprintf("127.0.0.1:%d", c.base+100+i) }
func (c *cluster) gossipAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", c.base+200+i) }
func (c *cluster) httpAddr(i int) string   { return fmt.Sprintf("127.0.0.1:%d", c.base+300+i) }
func (c *cluster) zkAddr(i int) string     { return fmt.Sprintf("127.0.0.1:%d", c.base+400+i) }

// binaryHasFlag reports whether `bin -h` lists -name, so coordbench passes
// flags that newer binaries have (a port for a listener, -pprof) only to
// binaries that take them.
func binaryHasFlag(ctx context.Context, bin, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "-h").CombinedOutput() // exits 0 or 2 after the usage
	// "  -name type\n" for a flag with a value, "  -name\n" for a bool.
	return strings.Contains(string(out), "-"+name+" ") || strings.Contains(string(out), "-"+name+"\n")
}

// writeClusterKey writes a new cluster key file to path, as `coord keygen
// -o` does: base64 of 32 random bytes, mode 0600, never over a file.
func writeClusterKey(path string) error {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return fmt.Errorf("cluster key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("cluster key: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key[:]) + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("cluster key: %w", err)
	}
	return f.Close()
}

// zkAddrs lists every server's ZooKeeper-protocol address, s1 first (nil
// when the binary has no -zk-addr).
func (c *cluster) zkAddrs() []string {
	if !c.zkFlag {
		return nil
	}
	out := make([]string, len(c.procs))
	for i := range c.procs {
		out[i] = c.zkAddr(i + 1)
	}
	return out
}

// grpcAddrs lists every server's client address, s1 first.
func (c *cluster) grpcAddrs() []string {
	out := make([]string, len(c.procs))
	for i := range c.procs {
		out[i] = c.grpcAddr(i + 1)
	}
	return out
}

// buildCoord builds cmd/coord into dir (from the current directory, which
// must be inside the module).
func buildCoord(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "coord")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/coord")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/coord (run coordbench from the module root or give -coord-bin): %v\n%s", err, out)
	}
	return bin, nil
}

// startCluster starts n voters and then observers observers and waits until
// they agree on a leader. On error the processes already started are
// killed.
func startCluster(ctx context.Context, bin, dir, logLevel string, extra []string, n, observers, base int, log io.Writer) (*cluster, error) {
	c := &cluster{bin: bin, dir: dir, logLevel: logLevel, extra: extra, voters: n, base: base, log: log}
	n += observers
	c.procs = make([]*proc, n)
	c.rebuild = make([]bool, n)
	c.zkFlag = binaryHasFlag(ctx, bin, "zk-addr")
	c.pprof = binaryHasFlag(ctx, bin, "pprof")
	if binaryHasFlag(ctx, bin, "super-digest") {
		c.super, c.digest = newSuperUser()
	}
	if binaryHasFlag(ctx, bin, "cluster-key-file") {
		// One key for all: a server with -peers and no key refuses to start.
		c.keyFile = filepath.Join(dir, "cluster.key")
		if err := writeClusterKey(c.keyFile); err != nil {
			return nil, err
		}
	}
	for i := 1; i <= n; i++ {
		addrs := []string{c.raftAddr(i), c.grpcAddr(i), c.gossipAddr(i), c.httpAddr(i)}
		if c.zkFlag {
			addrs = append(addrs, c.zkAddr(i))
		}
		for _, addr := range addrs {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("port for s%d not free (choose another -base-port): %w", i, err)
			}
			l.Close()
		}
	}
	for i := 1; i <= n; i++ {
		cc, err := grpc.NewClient(c.grpcAddr(i), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			c.stop()
			return nil, err
		}
		c.conns = append(c.conns, cc)
		c.admin = append(c.admin, api.NewAdminClient(cc))
	}
	if err := bringUp(ctx, c, 30*time.Second, 30*time.Second); err != nil {
		return nil, err
	}
	return c, nil
}

// waitServing waits until server i's HTTP port accepts connections. The
// server opens it after raft is up; its gRPC port opens before, and (as of
// this writing) a gRPC call that arrives in between dereferences a nil raft
// and kills the server, so nothing may call it before this returns.
func (c *cluster) waitServing(ctx context.Context, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", c.httpAddr(i), 100*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if !c.procs[i-1].alive() {
			return fmt.Errorf("s%d exited while starting; see %s", i, filepath.Join(c.dir, fmt.Sprintf("s%d.log", i)))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("s%d: HTTP port %s not open within %v: %v", i, c.httpAddr(i), timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// args are server i's flags: the same on every (re)start.
func (c *cluster) args(i int) []string {
	var peers []string
	for j := 1; j <= len(c.procs); j++ {
		if j != i {
			p := fmt.Sprintf("s%d=%s,%s", j, c.raftAddr(j), c.grpcAddr(j))
			if j > c.voters {
				p += ",observer"
			}
			peers = append(peers, p)
		}
	}
	args := []string{"-id", fmt.Sprintf("s%d", i), "-data-dir", filepath.Join(c.dir, fmt.Sprintf("s%d", i)),
		"-raft-addr", c.raftAddr(i), "-grpc-addr", c.grpcAddr(i), "-peers", strings.Join(peers, ";"),
		"-gossip-addr", c.gossipAddr(i), "-http-addr", c.httpAddr(i), "-bootstrap=true", "-log-level", c.logLevel,
		"-max-client-conns", "0"} // as zoo.cfg's maxClientCnxns=0 for -zookeeper
	if c.zkFlag {
		args = append(args, "-zk-addr", c.zkAddr(i))
	}
	if c.pprof {
		args = append(args, "-pprof")
	}
	if c.keyFile != "" {
		args = append(args, "-cluster-key-file", c.keyFile)
	}
	if c.digest != "" {
		args = append(args, "-super-digest", c.digest)
	}
	if i > 1 {
		args = append(args, "-join", c.gossipAddr(1))
	}
	if i > c.voters {
		args = append(args, "-observer", "-bootstrap=false")
	}
	return append(args, c.extra...)
}

// start (re)starts server i with its log appended to dir/sI.log.
func (c *cluster) start(i int) error {
	args := c.args(i)
	if c.rebuild[i-1] {
		args = append(args, "-rebuild")
		c.rebuild[i-1] = false
	}
	p, err := startProc(i, filepath.Join(c.dir, fmt.Sprintf("s%d.log", i)), c.bin, args...)
	if err != nil {
		return fmt.Errorf("starting s%d: %w", i, err)
	}
	cmd := p.cmd
	c.procs[i-1] = p
	zkNote := ""
	if c.zkFlag {
		zkNote = " zk " + c.zkAddr(i)
	}
	fmt.Fprintf(c.log, "# s%d pid %d grpc %s raft %s%s\n", i, cmd.Process.Pid, c.grpcAddr(i), c.raftAddr(i), zkNote)
	return nil
}

// wipe deletes stopped server i's data directory (the cluster key is
// outside it, as an operator provisions it) and has its next start add
// -rebuild, as docs/deploy.md has a server that lost its raft state start:
// the leader removes it, adds it back empty and sends it a snapshot.
func (c *cluster) wipe(i int) error {
	if c.alive(i) {
		return fmt.Errorf("wipe: s%d is running", i)
	}
	if err := os.RemoveAll(filepath.Join(c.dir, fmt.Sprintf("s%d", i))); err != nil {
		return err
	}
	c.rebuild[i-1] = true
	return nil
}

// kill sends SIGKILL to server i and waits for it to exit.
func (c *cluster) kill(i int) {
	p := c.procs[i-1]
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
	<-p.done
}

func (p *proc) alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop kills every server and closes the admin connections.
func (c *cluster) stop() {
	for i, p := range c.procs {
		if p != nil && p.alive() {
			c.kill(i + 1)
		}
	}
	for _, cc := range c.conns {
		cc.Close()
	}
}

// unexpectedExits describes servers that exited without coordbench
// killing them.
func (c *cluster) unexpectedExits() []string {
	var out []string
	for _, p := range c.procs {
		if p == nil || p.alive() {
			continue
		}
		p.mu.Lock()
		killed, state := p.killed, p.state
		p.mu.Unlock()
		if !killed {
			out = append(out, fmt.Sprintf("s%d exited on its own (%v); log %s", p.id, state, filepath.Join(c.dir, fmt.Sprintf("s%d.log", p.id))))
		}
	}
	return out
}

// status asks server i for its Admin.Status.
func (c *cluster) status(ctx context.Context, i int) (*api.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	return c.admin[i-1].Status(ctx, &api.StatusRequest{})
}

// waitLeader waits until a live server other than `not` (0: any) is the
// leader and every other live server names it as theirs, and returns its
// number.
func (c *cluster) waitLeader(ctx context.Context, timeout time.Duration, not int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		leader, agree := 0, true
		ids := map[int]string{}
		for i, p := range c.procs {
			if !p.alive() {
				continue
			}
			st, err := c.status(ctx, i+1)
			if err != nil {
				agree = false
				last = fmt.Sprintf("s%d: %v", i+1, err)
				continue
			}
			if st.Role == "leader" {
				leader = i + 1
			}
			ids[i+1] = st.LeaderId
		}
		if leader != 0 && leader != not && agree {
			for _, id := range ids {
				agree = agree && id == fmt.Sprintf("s%d", leader)
			}
			if agree {
				return leader, nil
			}
		}
		if leader == 0 {
			last = fmt.Sprintf("no leader yet (leader ids reported: %v)", ids)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no agreed leader within %v: %s", timeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// rssBytes is the resident set size of server i (0 when not available).
func (c *cluster) rssBytes(i int) int64 {
	p := c.procs[i-1]
	if p == nil || !p.alive() {
		return 0
	}
	return rssOf(p.cmd.Process.Pid)
}

// serverHealth is what the cluster looks like after a run.
type serverHealth struct {
	ID       string `json:"id"`
	Role     string `json:"role"`
	Znodes   int64  `json:"znodes"`
	Sessions int64  `json:"sessions"`
	Watches  int64  `json:"watches"`
	Applied  uint64 `json:"applied_index"`
	RSS      int64  `json:"rss_bytes,omitempty"`
	// Heap is the server's live heap just after a forced collection
	// (coord only: HeapAlloc from /debug/pprof/heap?gc=1).
	Heap int64 `json:"heap_bytes,omitempty"`
	// LogBytes is the raft log store's size on disk; Snapshots, SnapSecs
	// and SnapBytes are the snapshots taken since the server started and
	// the last one's duration and size (coord only, from /metrics).
	LogBytes  int64   `json:"log_bytes,omitempty"`
	Snapshots float64 `json:"snapshots,omitempty"`
	SnapSecs  float64 `json:"snapshot_last_seconds,omitempty"`
	SnapBytes float64 `json:"snapshot_last_bytes,omitempty"`
	Err       string  `json:"error,omitempty"`
}

// health collects every live server's status and memory.
func (c *cluster) health(ctx context.Context) []serverHealth {
	var out []serverHealth
	for i, p := range c.procs {
		h := serverHealth{ID: fmt.Sprintf("s%d", i+1)}
		if !p.alive() {
			h.Err = "not running"
			out = append(out, h)
			continue
		}
		st, err := c.status(ctx, i+1)
		if err != nil {
			h.Err = err.Error()
		} else {
			h.Role, h.Znodes, h.Sessions, h.Watches, h.Applied = st.Role, st.Znodes, st.Sessions, st.Watches, st.AppliedIndex
			h.LogBytes = st.DbBytes
		}
		m := c.metrics(ctx, i+1, "coord_raft_snapshots_total", "coord_raft_snapshot_last_duration_seconds", "coord_raft_snapshot_last_size_bytes")
		h.Snapshots, h.SnapSecs, h.SnapBytes = m[0], m[1], m[2]
		h.RSS = c.rssBytes(i + 1)
		h.Heap = c.liveHeap(ctx, i+1)
		out = append(out, h)
	}
	return out
}

// liveHeap asks server i to collect garbage (twice) and returns its HeapAlloc
// afterwards (pprof's heap page with gc=1 runs a collection first and
// prints the runtime's MemStats with debug=1), or 0 if it cannot tell.
func (c *cluster) liveHeap(ctx context.Context, i int) int64 {
	var heap int64
	// Twice: a pool's (sync.Pool) idle buffers outlive one collection.
	c.scanPage(ctx, i, "/debug/pprof/heap?gc=1&debug=1", time.Minute, func(string) {})
	c.scanPage(ctx, i, "/debug/pprof/heap?gc=1&debug=1", time.Minute, func(line string) {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			heap, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	})
	return heap
}

// metrics returns the values of the named unlabelled metrics on server i's
// /metrics page (0 for those it cannot read).
func (c *cluster) metrics(ctx context.Context, i int, names ...string) []float64 {
	out := make([]float64, len(names))
	c.scanPage(ctx, i, "/metrics", 10*time.Second, func(line string) {
		if name, val, ok := strings.Cut(line, " "); ok {
			if k := slices.Index(names, name); k >= 0 {
				out[k], _ = strconv.ParseFloat(strings.TrimSpace(val), 64)
			}
		}
	})
	return out
}

// scanPage fetches path from server i's HTTP port and hands each line to
// line; a page it cannot fetch gives no lines.
func (c *cluster) scanPage(ctx context.Context, i int, path string, timeout time.Duration, line func(string)) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.httpAddr(i)+path, nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line(sc.Text())
	}
}

// waitCaughtUp waits until server i follows the current leader and has
// applied everything the leader had committed when the wait began.
func (c *cluster) waitCaughtUp(ctx context.Context, i, leader int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var target uint64
	for {
		if target == 0 {
			if st, err := c.status(ctx, leader); err == nil {
				target = st.CommitIndex
			}
		}
		st, err := c.status(ctx, i)
		if err == nil && target != 0 && st.LeaderId == fmt.Sprintf("s%d", leader) && st.AppliedIndex >= target {
			return nil
		}
		if !c.procs[i-1].alive() {
			return fmt.Errorf("s%d exited while catching up", i)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("s%d did not catch up with s%d within %v", i, leader, timeout), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// startProc starts a child process with its output appended to logPath and
// a goroutine that records its exit.
func startProc(id int, logPath, bin string, args ...string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &proc{id: id, cmd: cmd, logFile: lf, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		p.mu.Lock()
		p.state = cmd.ProcessState
		p.mu.Unlock()
		lf.Close()
		close(p.done)
	}()
	return p, nil
}
