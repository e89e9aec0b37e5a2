package recipes_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Apache ZooKeeper from Debian's zookeeper package, started as real JVMs on
// loopback (as zk/compat does; kept small here).
const (
	zkJar       = "/usr/share/java/zookeeper.jar"
	slf4jSimple = "/usr/share/java/slf4j-simple.jar"
)

// zkMissing says why ZooKeeper cannot run here, or "".
func zkMissing() string {
	if os.Getenv("COORD_RECIPES_SKIP_ZOOKEEPER") != "" {
		return "ZooKeeper runs skipped: COORD_RECIPES_SKIP_ZOOKEEPER is set"
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "ZooKeeper runs need java (apt-get install default-jre-headless): " + err.Error()
	}
	if _, err := os.Stat(zkJar); err != nil {
		return "ZooKeeper runs need Debian's zookeeper package (apt-get install zookeeper): " + err.Error()
	}
	return ""
}

// tb is what the process helpers need of a test (or of TestMain's mainTB).
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

type zkCluster struct {
	nodes []*zkNode
}

type zkNode struct {
	id                       int
	dir, cfg, log            string
	client, quorum, election int
	cmd                      *exec.Cmd
	done                     chan struct{}
}

func (nd *zkNode) addr() string { return fmt.Sprintf("127.0.0.1:%d", nd.client) }

func (c *zkCluster) addrs() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.addr())
	}
	return out
}

// newZKCluster starts n ZooKeeper servers (tick 100 ms, session timeouts in
// [200 ms, 20 s], as coord's test configuration) and waits until each
// serves.
func newZKCluster(t tb, n int) *zkCluster {
	t.Helper()
	c := &zkCluster{}
	dir := t.TempDir()
	ports := freePorts(t, 3*n)
	for i := 0; i < n; i++ {
		nd := &zkNode{id: i + 1, dir: filepath.Join(dir, fmt.Sprintf("zk%d", i+1)),
			client: ports[3*i], quorum: ports[3*i+1], election: ports[3*i+2]}
		c.nodes = append(c.nodes, nd)
	}
	var servers strings.Builder
	for _, nd := range c.nodes {
		fmt.Fprintf(&servers, "server.%d=127.0.0.1:%d:%d\n", nd.id, nd.quorum, nd.election)
	}
	for _, nd := range c.nodes {
		data := filepath.Join(nd.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			t.Fatalf("%v", err)
		}
		cfg := fmt.Sprintf("tickTime=100\ninitLimit=100\nsyncLimit=50\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
			"minSessionTimeout=200\nmaxSessionTimeout=20000\nadmin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n%s",
			data, nd.client, servers.String())
		nd.cfg = filepath.Join(nd.dir, "zoo.cfg")
		nd.log = filepath.Join(nd.dir, "server.log")
		if err := os.WriteFile(nd.cfg, []byte(cfg), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", nd.id)), 0o644); err != nil {
			t.Fatalf("%v", err)
		}
	}
	t.Cleanup(func() {
		for _, nd := range c.nodes {
			nd.stop()
		}
	})
	for _, nd := range c.nodes {
		nd.start(t)
	}
	deadline := time.Now().Add(90 * time.Second)
	for _, nd := range c.nodes {
		for {
			if out, _ := fourLetter(nd.addr(), "srvr"); strings.Contains(out, "Mode: ") {
				break
			}
			select {
			case <-nd.done:
				b, _ := os.ReadFile(nd.log)
				t.Fatalf("ZooKeeper server %d exited during start:\n%s", nd.id, tail(b, 3000))
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("ZooKeeper server %d not serving after 90s", nd.id)
			}
			time.Sleep(50 * time.Millisecond) // a process starting up: nothing to wait on but its port
		}
	}
	return c
}

func (nd *zkNode) start(t tb) {
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("%v", err)
	}
	cp := zkJar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	nd.cmd = exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.admin.enableServer=false", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", nd.cfg)
	nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
	// The JVM dies with the test binary, even if no clean-up runs.
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nd.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting ZooKeeper: %v", err)
	}
	done := make(chan struct{})
	nd.done = done
	go func(cmd *exec.Cmd) {
		cmd.Wait()
		logf.Close()
		close(done)
	}(nd.cmd)
}

// stop kills the JVM (SIGKILL, a crash) and waits for it to go.
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

func freePorts(t tb, n int) []int {
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("%v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func fourLetter(addr, cmd string) (string, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := nc.Write([]byte(cmd)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(nc)
	return string(b), err
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
