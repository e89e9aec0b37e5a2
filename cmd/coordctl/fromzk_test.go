package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// startZooKeeper runs a standalone Apache ZooKeeper 3.8 (Debian's package)
// on a free loopback port, or skips the test when it is not installed.
func startZooKeeper(t *testing.T) string {
	t.Helper()
	const jar, slf4j = "/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-simple.jar"
	if _, err := exec.LookPath("java"); err != nil {
		t.Skipf("needs java and Debian's zookeeper package: %v", err)
	}
	if _, err := os.Stat(jar); err != nil {
		t.Skipf("needs Debian's zookeeper package: %v", err)
	}
	port := freePorts(t, 1)[0]
	dir := t.TempDir()
	cp := jar
	if _, err := os.Stat(slf4j); err == nil {
		cp += ":" + slf4j
	}
	logf, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.admin.enableServer=false", "-cp", cp,
		"org.apache.zookeeper.server.ZooKeeperServerMain", fmt.Sprint(port), filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("ZooKeeper log:\n%s", tail(logf.Name()))
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// ZooKeeper listens before its database is loaded, and a client that
	// connects then can be left unanswered for longer than the test waits
	// (the CI run of 2026-11-23 saw it), so wait until srvr says it serves.
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, err := srvr(addr); err == nil && strings.Contains(out, "Mode: standalone") {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("ZooKeeper not serving on %s within 60s", addr)
		}
		time.Sleep(50 * time.Millisecond) // the JVM is starting
	}
}

// srvr asks a ZooKeeper server for its srvr four-letter word.
func srvr(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// import --from-zookeeper copies a live ZooKeeper tree (data, ACLs,
// sequential names, binary and empty data; ephemerals left out) into
// coord, ends with equal digests, and a second run finds everything there.
func TestImportFromZooKeeper(t *testing.T) {
	zkAddr := startZooKeeper(t)
	zc, events, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	if err := waitZKSession(t.Context(), events, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	world := zk.WorldACL(zk.PermAll)
	mine := append(zk.WorldACL(zk.PermRead), zk.DigestACL(zk.PermAll, "ops", "pw")...)
	create := func(p string, data []byte, flags int32, acl []zk.ACL) string {
		t.Helper()
		got, err := zc.Create(p, data, flags, acl)
		if err != nil {
			t.Fatalf("ZooKeeper create %s: %v", p, err)
		}
		return got
	}
	create("/app", []byte("a"), 0, world)
	create("/app/cfg", []byte(`{"k":1}`), 0, mine)
	create("/app/bin", []byte{0, 1, 2, 0xff}, 0, world)
	create("/app/empty", []byte{}, 0, world)
	create("/app/q", nil, 0, world)
	var seq []string
	for i := 0; i < 3; i++ {
		seq = append(seq, create("/app/q/item-", []byte(fmt.Sprint(i)), zk.FlagSequence, world))
	}
	create("/app/deep", nil, 0, world)
	for i := 0; i < 200; i++ {
		create(fmt.Sprintf("/app/deep/n%03d", i), []byte(strings.Repeat("x", i)), 0, world)
	}
	create("/app/lock", []byte("mine"), zk.FlagEphemeral, world)
	create("/elsewhere", []byte("not copied"), 0, world)

	coord := startCluster(t, 1, 0).grpcAddrs()
	var res zkImport
	jsonOut(t, coord, &res, "import", "--from-zookeeper", zkAddr, "/app")
	if !res.Same || res.Ephemerals != 1 || res.Nodes != 209 || res.Created != 209 || res.Present != 0 || res.ZKDigest != res.Digest {
		t.Fatalf("import --from-zookeeper: %+v", res)
	}
	if out := mustRun(t, coord, "get", "/app/cfg"); strings.TrimSpace(out) != `{"k":1}` {
		t.Fatalf("get /app/cfg: %q", out)
	}
	if out := mustRun(t, coord, "ls", "/app/q"); !strings.Contains(out, filepath.Base(seq[2])) {
		t.Fatalf("ls /app/q: %q (want %v)", out, seq)
	}
	fails(t, coord, exitNoNode, "get", "/app/lock")
	fails(t, coord, exitNoNode, "get", "/elsewhere")
	acl := strings.Split(strings.TrimSpace(mustRun(t, coord, "acl", "get", "/app/cfg")), "\n")
	if len(acl) != 2 || acl[0] != "world:anyone:r" || !strings.HasPrefix(acl[1], "digest:ops:") || !strings.HasSuffix(acl[1], ":cdrwa") {
		t.Fatalf("acl of /app/cfg: %q", acl)
	}

	// Again: everything is there already.
	var again zkImport
	jsonOut(t, coord, &again, "import", "--from-zookeeper", zkAddr, "/app")
	if !again.Same || again.Created != 0 || again.Present != 209 {
		t.Fatalf("second import: %+v", again)
	}
	raw, _ := json.Marshal(again)
	t.Logf("second run: %s", raw)
}
