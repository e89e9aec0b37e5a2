package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"coord/internal/freeport"
	"coord/server"
)

// The tests run the real binaries: coordctl against coord server processes
// on loopback, both built once per test binary.
var bins struct {
	dir           string
	coord, ctl    string
	sharedCluster *procCluster
}

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "coordctl-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		bins.dir = dir
		bins.coord, bins.ctl = filepath.Join(dir, "coord"), filepath.Join(dir, "coordctl")
		for pkg, out := range map[string]string{"coord/cmd/coord": bins.coord, "coord/cmd/coordctl": bins.ctl} {
			if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, b)
				return 1
			}
		}
		defer func() {
			if bins.sharedCluster != nil {
				bins.sharedCluster.stop()
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// proc is one coord server process.
type proc struct {
	id                   string
	raft, grpc, zk, http string
	dir, log             string
	args                 []string
	cmd                  *exec.Cmd
	done                 chan struct{}
}

// procCluster is a set of coord processes.
type procCluster struct {
	nodes   []*proc
	keyFile string // the cluster key every server proves membership with (-cluster-key-file)
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

// newProcs prepares voters bootstrapped together and spares: servers known
// to the voters as observers (so the voters know their gRPC addresses) that
// know no one themselves and so never ask to join: an operator adds them.
func newProcs(t testing.TB, dir string, voters, spares int) *procCluster {
	t.Helper()
	n := voters + spares
	ports := freePorts(t, 4*n)
	// One cluster key for all (a server with -peers and no key refuses to
	// start; a spare with a key of its own could not talk to the voters).
	c := &procCluster{keyFile: filepath.Join(dir, "cluster.key")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	key, err := server.GenerateClusterKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := range n {
		a := func(k int) string { return fmt.Sprintf("127.0.0.1:%d", ports[4*i+k]) }
		p := &proc{id: fmt.Sprintf("s%d", i+1), raft: a(0), grpc: a(1), zk: a(2), http: a(3), dir: filepath.Join(dir, fmt.Sprintf("s%d", i+1))}
		p.log = filepath.Join(p.dir, "server.log")
		spec := fmt.Sprintf("%s=%s,%s", p.id, p.raft, p.grpc)
		if i >= voters {
			spec += ",observer"
		}
		peers = append(peers, spec)
		c.nodes = append(c.nodes, p)
	}
	for i, p := range c.nodes {
		p.args = []string{"-id", p.id, "-data-dir", filepath.Join(p.dir, "data"), "-raft-addr", p.raft, "-grpc-addr", p.grpc,
			"-zk-addr", p.zk, "-http-addr", p.http, "-gossip-addr", "", "-tick", "100ms", "-raft-timeout", "300ms",
			"-cluster-key-file", c.keyFile, "-super-digest", ctlAdminDigest}
		if i < voters {
			p.args = append(p.args, "-peers", strings.Join(peers, ";"), "-bootstrap")
		} else {
			p.args = append(p.args, "-observer", "-bootstrap=false")
		}
		if err := os.MkdirAll(p.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (p *proc) start() error {
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bins.coord, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.done = make(chan struct{})
	go func() { p.cmd.Wait(); logf.Close(); close(p.done) }()
	return nil
}

func (p *proc) stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (c *procCluster) stop() {
	for _, p := range c.nodes {
		p.stop()
	}
}

var healthClient = &http.Client{Timeout: time.Second}

// waitHealthy waits until p's /health says it serves with a leader.
func (p *proc) waitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := healthClient.Get("http://" + p.http + "/health")
		if err == nil {
			var h struct{ Healthy bool }
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if h.Healthy {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited: %s", p.id, tail(p.log))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy after %v: %s", p.id, timeout, tail(p.log))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// startCluster starts voters+spares processes; the voters must become
// healthy, the spares only run. They stop when the test ends.
func startCluster(t testing.TB, voters, spares int) *procCluster {
	t.Helper()
	c := newProcs(t, t.TempDir(), voters, spares)
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			for _, p := range c.nodes {
				t.Logf("%s log:\n%s", p.id, tail(p.log))
			}
		}
	})
	for _, p := range c.nodes {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.nodes[:voters] {
		if err := p.waitHealthy(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// shared returns the 3-voter cluster the znode tests share (each works
// under a root of its own); TestMain stops it.
func shared(t testing.TB) *procCluster {
	t.Helper()
	if bins.sharedCluster == nil {
		c := newProcs(t, filepath.Join(bins.dir, "shared"), 3, 0)
		for _, p := range c.nodes {
			// TestClusterReads reads mntr, which a default server does
			// not serve (srvr and ruok only): one flag away.
			p.args = append(p.args, "-4lw-whitelist", "srvr,ruok,mntr")
		}
		bins.sharedCluster = c
		for _, p := range c.nodes {
			if err := p.start(); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range c.nodes {
			if err := p.waitHealthy(30 * time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	return bins.sharedCluster
}

func (c *procCluster) grpcAddrs() string {
	var out []string
	for _, p := range c.nodes {
		out = append(out, p.grpc)
	}
	return strings.Join(out, ",")
}

func (c *procCluster) zkAddrs() string {
	var out []string
	for _, p := range c.nodes {
		out = append(out, p.zk)
	}
	return strings.Join(out, ",")
}

// result is one run of coordctl.
type result struct {
	stdout, stderr string
	code           int
}

// ctl runs coordctl with args against servers (COORD_SERVERS), with no
// config file, a bounded time and stdin as given.
func ctl(t testing.TB, servers string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bins.ctl, args...)
	cmd.Env = ctlEnv(t, servers)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("coordctl %v: %v", args, err)
	}
	return r
}

func ctlEnv(t testing.TB, servers string) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "COORD") && !strings.HasPrefix(e, "HOME=") && !strings.HasPrefix(e, "XDG_CONFIG_HOME=") {
			env = append(env, e)
		}
	}
	home := filepath.Join(bins.dir, "home")
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "COORD_SERVERS="+servers)
}

// mustRun runs coordctl and fails the test unless it exits 0.
func mustRun(t testing.TB, servers string, args ...string) string {
	t.Helper()
	r := ctl(t, servers, "", args...)
	if r.code != 0 {
		t.Fatalf("coordctl %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

// fails runs coordctl, wants exit code want and a one-line error.
func fails(t testing.TB, servers string, want int, args ...string) result {
	t.Helper()
	r := ctl(t, servers, "", args...)
	if r.code != want {
		t.Fatalf("coordctl %s: exit %d, want %d; stderr %q", strings.Join(args, " "), r.code, want, r.stderr)
	}
	if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "coordctl: ") {
		t.Fatalf("coordctl %s: stderr %q, want one line starting coordctl: ", strings.Join(args, " "), r.stderr)
	}
	return r
}

// jsonOut runs coordctl -o json and decodes its output into v.
func jsonOut(t testing.TB, servers string, v any, args ...string) {
	t.Helper()
	out := mustRun(t, servers, append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("coordctl -o json %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
