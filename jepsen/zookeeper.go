package jepsen

import (
	"context"
	"errors"
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

// The Apache ZooKeeper 3.8 jars of Debian's zookeeper package.
const (
	zkJar       = "/usr/share/java/zookeeper.jar"
	slf4jSimple = "/usr/share/java/slf4j-simple.jar"
)

// ErrNoZooKeeper says java or Debian's zookeeper package is missing.
var ErrNoZooKeeper = errors.New("jepsen: needs java and Debian's zookeeper package (" + zkJar + ")")

// ZooKeeper is a standalone Apache ZooKeeper server in its own process, the
// reference the differential mode compares coord with.
type ZooKeeper struct {
	Addr string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartZooKeeper runs a standalone ZooKeeper on a free loopback port with
// its data and log under dir, and waits (bounded by ctx) until it serves.
func StartZooKeeper(ctx context.Context, dir string) (*ZooKeeper, error) {
	if _, err := exec.LookPath("java"); err != nil {
		return nil, ErrNoZooKeeper
	}
	if _, err := os.Stat(zkJar); err != nil {
		return nil, ErrNoZooKeeper
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "zookeeper-data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	conf := fmt.Sprintf("tickTime=2000\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
		"admin.enableServer=false\n4lw.commands.whitelist=*\nmaxClientCnxns=0\n", data, ports[0])
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	z := &ZooKeeper{Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), log: filepath.Join(dir, "zookeeper.log"), done: make(chan struct{})}
	logf, err := os.Create(z.log)
	if err != nil {
		return nil, err
	}
	cp := zkJar
	if _, err := os.Stat(slf4jSimple); err == nil {
		cp += ":" + slf4jSimple
	}
	z.cmd = exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		// TTL nodes, and no container or TTL node reaped while a
		// differential run compares (coord gets -container-check-interval).
		"-Dzookeeper.extendedTypesEnabled=true", "-Dznode.container.checkIntervalMs=86400000",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg)
	z.cmd.Stdout, z.cmd.Stderr = logf, logf
	z.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := z.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting ZooKeeper: %w", err)
	}
	go func() {
		z.cmd.Wait()
		logf.Close()
		close(z.done)
	}()
	// ZooKeeper listens before its database is loaded; a client that
	// connects then can be left unanswered, so wait until srvr says it
	// serves.
	for {
		if out, err := fourLetterWord(z.Addr, "srvr"); err == nil && strings.Contains(out, "Mode: standalone") {
			return z, nil
		}
		select {
		case <-ctx.Done():
			z.Close()
			return nil, fmt.Errorf("ZooKeeper not serving: %w; its log:\n%s", ctx.Err(), LogTail(z.log, 20))
		case <-z.done:
			return nil, fmt.Errorf("ZooKeeper exited; its log:\n%s", LogTail(z.log, 20))
		case <-time.After(100 * time.Millisecond): // a JVM starting: nothing to wait on but its port
		}
	}
}

// Close kills the server and waits for it to go.
func (z *ZooKeeper) Close() {
	z.cmd.Process.Kill()
	select {
	case <-z.done:
	case <-time.After(10 * time.Second):
	}
}

// fourLetterWord sends a four-letter word and returns the whole answer.
func fourLetterWord(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
