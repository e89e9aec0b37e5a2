package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"coord/internal/fourletter"
)

// zkEnsemble is a loopback ensemble of Apache ZooKeeper servers (Debian's
// zookeeper package: /usr/share/java/zookeeper.jar, whose manifest names
// the jars it needs), one JVM each, ids 1..N. Server i takes client
// connections on base+400+i (where coord's -local puts its ZooKeeper port),
// quorum traffic on base+i and leader election on base+100+i, and keeps its
// dataDir (myid, transaction log, snapshots) under dir/zkI. The settings
// are ZooKeeper's usual ones (tickTime 2000, initLimit 10, syncLimit 5,
// forceSync and snapCount at their defaults), plus what a loopback ensemble
// on one machine needs: every four-letter word allowed, no AdminServer
// (its port 8080 would clash), no per-address connection limit (all
// sessions come from 127.0.0.1).
type zkEnsemble struct {
	java     string
	cp       string   // classpath
	jvmFlags []string // before the main class
	dir      string
	base     int
	logLevel string // slf4j-simple's level for the servers' logs
	procs    []*proc
	log      io.Writer // progress lines
}

func (z *zkEnsemble) clientAddr(i int) string { return fmt.Sprintf("127.0.0.1:%d", z.base+400+i) }
func (z *zkEnsemble) quorumPort(i int) int    { return z.base + i }
func (z *zkEnsemble) electionPort(i int) int  { return z.base + 100 + i }

// clientAddrs lists every server's client address, zk1 first.
func (z *zkEnsemble) clientAddrs() []string {
	out := make([]string, len(z.procs))
	for i := range z.procs {
		out[i] = z.clientAddr(i + 1)
	}
	return out
}

// zkConfig is server i's zoo.cfg in an ensemble of n voters and then
// observers observers (ZooKeeper's static observer setup: ":observer" on
// their server lines, and peerType=observer in their own file) whose ports
// start at base.
func zkConfig(i, n, observers, base int, dataDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=2000\ninitLimit=10\nsyncLimit=5\n")
	fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", base+400+i)
	fmt.Fprintf(&b, "4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\n")
	if i > n {
		fmt.Fprintf(&b, "peerType=observer\n")
	}
	for j := 1; j <= n+observers; j++ {
		role := ""
		if j > n {
			role = ":observer"
		}
		fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d%s\n", j, base+j, base+100+j, role)
	}
	return b.String()
}

// startZooKeeper writes the configuration of n voters and observers
// observers, starts them and waits until they serve and one leads. On
// error the JVMs already started are killed.
func startZooKeeper(ctx context.Context, java, cp string, jvmFlags []string, dir, logLevel string, n, observers, base int, log io.Writer) (*zkEnsemble, error) {
	voters := n
	n += observers
	z := &zkEnsemble{java: java, cp: cp, jvmFlags: jvmFlags, dir: dir, base: base, logLevel: logLevel, procs: make([]*proc, n), log: log}
	for _, jar := range strings.Split(cp, ":") {
		if _, err := os.Stat(jar); err != nil {
			return nil, fmt.Errorf("-zookeeper needs Debian's zookeeper package (apt-get install zookeeper) or -zk-classpath: %w", err)
		}
	}
	if _, err := exec.LookPath(java); err != nil {
		return nil, fmt.Errorf("-zookeeper needs java (apt-get install default-jre-headless) or -zk-java: %w", err)
	}
	for i := 1; i <= n; i++ {
		for _, addr := range []string{z.clientAddr(i), fmt.Sprintf("127.0.0.1:%d", z.quorumPort(i)), fmt.Sprintf("127.0.0.1:%d", z.electionPort(i))} {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, fmt.Errorf("port for zk%d not free (choose another -base-port): %w", i, err)
			}
			l.Close()
		}
		data := filepath.Join(dir, fmt.Sprintf("zk%d", i))
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", i)), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(z.cfgPath(i), []byte(zkConfig(i, voters, observers, base, data)), 0o644); err != nil {
			return nil, err
		}
	}
	if err := bringUp(ctx, z, 90*time.Second, 60*time.Second); err != nil {
		return nil, err
	}
	return z, nil
}

func (z *zkEnsemble) cfgPath(i int) string { return filepath.Join(z.dir, fmt.Sprintf("zk%d.cfg", i)) }
func (z *zkEnsemble) logPath(i int) string { return filepath.Join(z.dir, fmt.Sprintf("zk%d.log", i)) }

// javaArgs are server i's JVM arguments: the same on every (re)start.
func (z *zkEnsemble) javaArgs(i int) []string {
	args := append([]string{}, z.jvmFlags...)
	args = append(args, "-Dzookeeper.admin.enableServer=false",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel="+z.logLevel,
		"-cp", z.cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", z.cfgPath(i))
	return args
}

// start (re)starts server i with its output appended to dir/zkI.log.
func (z *zkEnsemble) start(i int) error {
	p, err := startProc(i, z.logPath(i), z.java, z.javaArgs(i)...)
	if err != nil {
		return fmt.Errorf("starting zk%d: %w", i, err)
	}
	cmd := p.cmd
	z.procs[i-1] = p
	fmt.Fprintf(z.log, "# zk%d pid %d client %s quorum %d election %d\n", i, cmd.Process.Pid, z.clientAddr(i), z.quorumPort(i), z.electionPort(i))
	return nil
}

// wipe deletes stopped server i's transaction logs and snapshots
// (version-2), keeping myid: started again, it syncs the whole state from
// the leader (a SNAP), as a ZooKeeper server whose disk was replaced does.
func (z *zkEnsemble) wipe(i int) error {
	if z.alive(i) {
		return fmt.Errorf("wipe: zk%d is running", i)
	}
	return os.RemoveAll(filepath.Join(z.dir, fmt.Sprintf("zk%d", i), "version-2"))
}

func (z *zkEnsemble) size() int         { return len(z.procs) }
func (z *zkEnsemble) name(i int) string { return fmt.Sprintf("zk%d", i) }
func (z *zkEnsemble) alive(i int) bool  { return z.procs[i-1] != nil && z.procs[i-1].alive() }

// srvr asks server i for its `srvr` four-letter word.
func (z *zkEnsemble) srvr(ctx context.Context, i int) (zkSrvr, error) {
	out, err := fourLetter(ctx, z.clientAddr(i), "srvr", 500*time.Millisecond)
	if err != nil {
		return zkSrvr{}, err
	}
	return parseSrvr(out)
}

// waitServing waits until server i answers srvr with a mode (a server
// that has no quorum yet answers that it is not serving).
func (z *zkEnsemble) waitServing(ctx context.Context, i int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		_, err := z.srvr(ctx, i)
		if err == nil {
			return nil
		}
		if !z.alive(i) {
			return fmt.Errorf("zk%d exited while starting; see %s", i, z.logPath(i))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("zk%d not serving within %v: %v (log %s)", i, timeout, err, z.logPath(i))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (z *zkEnsemble) waitLeader(ctx context.Context, timeout time.Duration, not int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		leader, agree := 0, true
		modes := map[string]string{}
		for i := range z.procs {
			if !z.alive(i + 1) {
				continue
			}
			s, err := z.srvr(ctx, i+1)
			if err != nil {
				agree = false
				modes[z.name(i+1)] = err.Error()
				continue
			}
			modes[z.name(i+1)] = s.Mode
			switch s.Mode {
			case "leader", "standalone":
				leader = i + 1
			case "follower", "observer":
			default:
				agree = false
			}
		}
		if leader != 0 && leader != not && agree {
			return leader, nil
		}
		last = fmt.Sprint(modes)
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no ZooKeeper leader with every live server following within %v: %s", timeout, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (z *zkEnsemble) isLeader(ctx context.Context, i int) bool {
	s, err := z.srvr(ctx, i)
	return err == nil && (s.Mode == "leader" || s.Mode == "standalone")
}

func (z *zkEnsemble) killAsync(i int) <-chan struct{} {
	p := z.procs[i-1]
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.cmd.Process.Kill()
	return p.done
}

func (z *zkEnsemble) restart(ctx context.Context, i int) error {
	if err := z.start(i); err != nil {
		return err
	}
	return z.waitServing(ctx, i, 90*time.Second)
}

func (z *zkEnsemble) waitCaughtUp(ctx context.Context, i, leader int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var target int64 = -1
	var err error
	for {
		if target < 0 {
			if s, e := z.srvr(ctx, leader); e == nil && s.Mode == "leader" {
				target = s.Zxid
			}
		}
		var s zkSrvr
		s, err = z.srvr(ctx, i)
		// A follower serves only once it has synced with its leader; right
		// after an election the leader reports the new epoch's first zxid
		// (low half 0), which a follower shows only after the epoch's first
		// write, so serving as a follower is enough then.
		if err == nil && target >= 0 && s.Mode == "follower" && (s.Zxid >= target || target&0xffffffff == 0) {
			return nil
		}
		if !z.alive(i) {
			return fmt.Errorf("zk%d exited while catching up", i)
		}
		select {
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("zk%d did not catch up with zk%d within %v", i, leader, timeout), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (z *zkEnsemble) health(ctx context.Context) []serverHealth {
	var out []serverHealth
	for i, p := range z.procs {
		h := serverHealth{ID: z.name(i + 1)}
		if p == nil || !p.alive() {
			h.Err = "not running"
			out = append(out, h)
			continue
		}
		s, err := z.srvr(ctx, i+1)
		if err != nil {
			h.Err = err.Error()
		} else {
			h.Role, h.Znodes, h.Applied = s.Mode, s.Nodes, uint64(s.Zxid)
			if m, err := z.mntr(ctx, i+1); err == nil {
				h.Sessions, _ = strconv.ParseInt(m["zk_global_sessions"], 10, 64)
				h.Watches, _ = strconv.ParseInt(m["zk_watch_count"], 10, 64)
			}
		}
		h.RSS = rssOf(p.cmd.Process.Pid)
		out = append(out, h)
	}
	return out
}

func (z *zkEnsemble) mntr(ctx context.Context, i int) (map[string]string, error) {
	out, err := fourLetter(ctx, z.clientAddr(i), "mntr", time.Second)
	if err != nil {
		return nil, err
	}
	m := parseMntr(out)
	if len(m) == 0 {
		return nil, fmt.Errorf("mntr: %q", strings.TrimSpace(out))
	}
	return m, nil
}

func (z *zkEnsemble) leaderSessions(ctx context.Context) int64 {
	for i := range z.procs {
		if !z.alive(i+1) || !z.isLeader(ctx, i+1) {
			continue
		}
		m, err := z.mntr(ctx, i+1)
		if err != nil {
			return -1
		}
		n, err := strconv.ParseInt(m["zk_global_sessions"], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	return -1
}

// stop kills every server.
func (z *zkEnsemble) stop() {
	for i, p := range z.procs {
		if p != nil && p.alive() {
			<-z.killAsync(i + 1)
		}
	}
}

func (z *zkEnsemble) unexpectedExits() []string {
	var out []string
	for _, p := range z.procs {
		if p == nil || p.alive() {
			continue
		}
		p.mu.Lock()
		killed, state := p.killed, p.state
		p.mu.Unlock()
		if !killed {
			out = append(out, fmt.Sprintf("zk%d exited on its own (%v); log %s", p.id, state, z.logPath(p.id)))
		}
	}
	return out
}

// zkSrvr is what coordbench reads from `srvr`.
type zkSrvr struct {
	Mode  string // leader, follower, observer, standalone
	Zxid  int64
	Nodes int64
}

// parseSrvr reads ZooKeeper's `srvr` output. A server without a quorum
// answers "This ZooKeeper instance is not currently serving requests",
// which is an error here.
func parseSrvr(out string) (zkSrvr, error) {
	var s zkSrvr
	var haveMode, haveZxid bool
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "Mode":
			s.Mode, haveMode = v, v != ""
		case "Zxid":
			z, err := strconv.ParseInt(strings.TrimPrefix(strings.ToLower(v), "0x"), 16, 64)
			if err != nil {
				return s, fmt.Errorf("srvr: bad Zxid %q", v)
			}
			s.Zxid, haveZxid = z, true
		case "Node count":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return s, fmt.Errorf("srvr: bad Node count %q", v)
			}
			s.Nodes = n
		}
	}
	if !haveMode || !haveZxid {
		msg := strings.TrimSpace(out)
		if len(msg) > 100 {
			msg = msg[:100]
		}
		return s, fmt.Errorf("srvr: no mode and zxid in %q", msg)
	}
	return s, nil
}

// parseMntr reads `mntr` output: one "key<TAB>value" per line.
func parseMntr(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if ok && strings.HasPrefix(k, "zk_") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// fourLetter sends a four-letter word and returns everything the server
// writes before it closes the connection (timeout bounds the dial, and then
// the exchange); a part of an answer is an answer.
func fourLetter(ctx context.Context, addr, word string, timeout time.Duration) (string, error) {
	out, err := fourletter.Ask(ctx, addr, word, fourletter.Options{DialTimeout: timeout, Timeout: timeout})
	if err != nil && out == "" {
		return "", err
	}
	return out, nil
}

// rssOf is the resident set size of process pid, from /proc (0 when not
// available).
func rssOf(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

func (z *zkEnsemble) pid(i int) int {
	if !z.alive(i) {
		return 0
	}
	return z.procs[i-1].cmd.Process.Pid
}

// liveHeap runs a full collection in server i's JVM (jcmd GC.run) and
// returns the heap it then uses (GC.heap_info's "used"), or 0.
func (z *zkEnsemble) liveHeap(ctx context.Context, i int) int64 {
	pid := z.pid(i)
	if pid == 0 {
		return 0
	}
	jcmd := filepath.Join(filepath.Dir(z.javaPath()), "jcmd")
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := exec.CommandContext(ctx, jcmd, strconv.Itoa(pid), "GC.run").Run(); err != nil {
		return 0
	}
	out, err := exec.CommandContext(ctx, jcmd, strconv.Itoa(pid), "GC.heap_info").Output()
	if err != nil {
		return 0
	}
	return heapUsed(out)
}

// heapUsed is the used heap jcmd GC.heap_info reports, in bytes (0 if it
// does not say).
func heapUsed(out []byte) int64 {
	m := heapInfoUsed.FindSubmatch(out)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// heapInfoUsed finds the used heap in jcmd GC.heap_info's first line
// ("garbage-first heap   total 262144K, used 35466K [...").
var heapInfoUsed = regexp.MustCompile(`heap\s+total \d+K, used (\d+)K`)

// javaPath is the java binary's path with links resolved (jcmd sits
// beside it in a JDK).
func (z *zkEnsemble) javaPath() string {
	p, err := exec.LookPath(z.java)
	if err != nil {
		return z.java
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
