// Package zkproc runs Apache ZooKeeper 3.8 from Debian's zookeeper package
// as real JVM processes on loopback: the reference coord is compared with by
// the recipes' and coordctl's tests, jepsen's differential run and
// cmd/watchmem. A standalone server or a small static ensemble; each JVM
// dies with the process that started it.
package zkproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"coord/internal/fourletter"
	"coord/internal/freeport"
)

// The jars of Debian's zookeeper package.
const (
	Jar   = "/usr/share/java/zookeeper.jar"
	slf4j = "/usr/share/java/slf4j-simple.jar"
)

// ErrMissing says java or Debian's zookeeper package is not installed.
var ErrMissing = errors.New("zkproc: needs java and Debian's zookeeper package (apt-get install zookeeper default-jre-headless)")

// Check returns an error wrapping ErrMissing if ZooKeeper cannot run here.
func Check() error {
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	if _, err := os.Stat(Jar); err != nil {
		return fmt.Errorf("%w: %v", ErrMissing, err)
	}
	return nil
}

// Classpath is the server's class path: the jar and, where installed, the
// simple slf4j binding (otherwise ZooKeeper logs nothing).
func Classpath() string {
	if _, err := os.Stat(slf4j); err == nil {
		return Jar + ":" + slf4j
	}
	return Jar
}

// Options describe the servers to start.
type Options struct {
	// Dir holds each server's data, zoo.cfg and log.
	Dir string
	// Servers is 1 for a standalone server (ZooKeeperServerMain), more for
	// a static ensemble (QuorumPeerMain).
	Servers int
	// Config is zoo.cfg lines added to the ones Start writes (dataDir,
	// clientPort on 127.0.0.1, admin server off, every four-letter word, no
	// connection limit, and the ensemble's server lines). Without a
	// tickTime line ZooKeeper's 2000 ms applies.
	Config string
	// JVM flags follow the defaults (-Xmx256m, serial GC, C1 only, slf4j at
	// warn), so a later -Xmx replaces the default one.
	JVM []string
	// Output receives every server's output; nil writes each to its log
	// file (Server.Log).
	Output io.Writer
}

// Server is one ZooKeeper process.
type Server struct {
	ID   int
	Addr string // client address, 127.0.0.1:port
	Log  string // its output, unless Options.Output took it
	cmd  *exec.Cmd
	done chan struct{}
}

// Pid is the JVM's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Kill sends SIGKILL and waits (up to 10 s) for the process to go.
func (s *Server) Kill() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

// Ensemble is the servers Start started.
type Ensemble struct{ Servers []*Server }

// Addrs are the servers' client addresses.
func (e *Ensemble) Addrs() []string {
	var out []string
	for _, s := range e.Servers {
		out = append(out, s.Addr)
	}
	return out
}

// Close kills every server.
func (e *Ensemble) Close() {
	for _, s := range e.Servers {
		s.Kill()
	}
}

// Start writes the configuration, starts the servers and waits, bounded by
// ctx, until each answers srvr with its mode: ZooKeeper listens before its
// database is loaded, and a client that connects then can be left
// unanswered. On error nothing is left running.
func Start(ctx context.Context, o Options) (e *Ensemble, err error) {
	if err := Check(); err != nil {
		return nil, err
	}
	n := max(o.Servers, 1)
	ports, err := freeport.Ports(3 * n)
	if err != nil {
		return nil, err
	}
	e = &Ensemble{}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	var peers strings.Builder
	if n > 1 {
		for i := 0; i < n; i++ {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
		}
	}
	for i := 0; i < n; i++ {
		s := &Server{ID: i + 1, Addr: fmt.Sprintf("127.0.0.1:%d", ports[3*i]), done: make(chan struct{})}
		e.Servers = append(e.Servers, s)
		if err := s.start(o, n, ports[3*i], peers.String()); err != nil {
			return nil, err
		}
	}
	for _, s := range e.Servers {
		if err := s.waitServing(ctx); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (s *Server) start(o Options, n, port int, peers string) error {
	dir := filepath.Join(o.Dir, fmt.Sprintf("zk%d", s.ID))
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"+
		"4lw.commands.whitelist=*\nmaxClientCnxns=0\n%s\n%s", data, port, strings.TrimSpace(o.Config), peers)
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return err
	}
	main := "org.apache.zookeeper.server.ZooKeeperServerMain"
	if n > 1 {
		main = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintf("%d\n", s.ID)), 0o644); err != nil {
			return err
		}
	}
	args := append([]string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dzookeeper.admin.enableServer=false", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}, o.JVM...)
	args = append(args, "-cp", Classpath(), main, cfg)
	s.cmd = exec.Command("java", args...)
	out := o.Output
	var logf *os.File
	if out == nil {
		s.Log = filepath.Join(dir, "server.log")
		f, err := os.Create(s.Log)
		if err != nil {
			return err
		}
		logf, out = f, f
	}
	s.cmd.Stdout, s.cmd.Stderr = out, out
	// The JVM dies with this process, even if no clean-up runs.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		if logf != nil {
			logf.Close()
		}
		return fmt.Errorf("zkproc: starting ZooKeeper: %w", err)
	}
	go func() {
		s.cmd.Wait()
		if logf != nil {
			logf.Close()
		}
		close(s.done)
	}()
	return nil
}

func (s *Server) waitServing(ctx context.Context) error {
	for {
		if out, err := FourLetter(s.Addr, "srvr"); err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkproc: ZooKeeper server %d not serving on %s: %w%s", s.ID, s.Addr, ctx.Err(), s.logTail())
		case <-s.done:
			return fmt.Errorf("zkproc: ZooKeeper server %d exited during start%s", s.ID, s.logTail())
		case <-time.After(50 * time.Millisecond): // a JVM starting: nothing to wait on but its port
		}
	}
}

func (s *Server) logTail() string {
	if s.Log == "" {
		return ""
	}
	return "; its log:\n" + Tail(s.Log, 3000)
}

// FourLetter sends a four-letter word and returns the whole answer
// (fourletter.Ask with a second to connect and two to answer).
func FourLetter(addr, word string) (string, error) {
	return fourletter.Ask(context.Background(), addr, word, fourletter.Options{DialTimeout: time.Second, Timeout: 2 * time.Second})
}

// Tail returns the last n bytes of a file.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
