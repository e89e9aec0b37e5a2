// Package servergroup is the part of an in-process test cluster that does
// not depend on the server's type: the running servers and their
// configurations, starting one (stopped when the test ends), restarting
// one, and the waits on the servers' change channels (a leader, the raft
// configuration, any condition), never on polling. internal/testcluster
// builds other packages' test clusters of coord servers on it, and package
// server's own tests build theirs (they cannot import
// internal/testcluster, which imports server).
package servergroup

import (
	"io"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"
)

// TB is the part of testing.TB a group uses (a package's TestMain can hand
// in its own, for a cluster shared by its tests).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Log(args ...any)
}

// Server is what a group needs of one of its servers.
type Server interface {
	ID() string
	RaftAddr() string
	GRPCAddr() string
	ZKAddr() string
	IsLeader() bool
	Closed() bool
	Close() error
	// Changed is closed at the server's next change of role, leader or
	// applied entry.
	Changed() <-chan struct{}
	// RaftConfiguration names the voters and non-voters of the raft
	// configuration the server knows.
	RaftConfiguration() (voters, nonVoters []string, err error)
}

// Group is a test's running servers of type S, each started from a
// configuration of type C by New.
type Group[S Server, C any] struct {
	TB      TB
	New     func(C) (S, error)
	Servers []S
	Configs []C // the configuration each of Servers runs with
}

// Start starts a server with cfg, adds it to the group and has it closed
// when the test ends.
func (g *Group[S, C]) Start(cfg C) S {
	g.TB.Helper()
	s, err := g.New(cfg)
	if err != nil {
		g.TB.Fatalf("starting a server: %v", err)
	}
	g.TB.Cleanup(func() { s.Close() })
	g.Servers = append(g.Servers, s)
	g.Configs = append(g.Configs, cfg)
	return s
}

// Restart stops server i if it runs and starts it again with cfg (its
// configuration with the addresses it listened on), trying up to tries
// times 50 ms apart: a port the old server held may take a moment to free.
func (g *Group[S, C]) Restart(i int, cfg C, tries int) S {
	g.TB.Helper()
	g.Servers[i].Close()
	var s S
	var err error
	for try := 0; try < max(tries, 1); try++ {
		if try > 0 {
			time.Sleep(50 * time.Millisecond)
		}
		if s, err = g.New(cfg); err == nil {
			break
		}
	}
	if err != nil {
		g.TB.Fatalf("restarting %s: %v", g.Servers[i].ID(), err)
	}
	g.TB.Cleanup(func() { s.Close() })
	g.Servers[i], g.Configs[i] = s, cfg
	return s
}

// WaitFor waits until cond holds, checking it again whenever any running
// server changes (role, leader, an applied entry), for at most limit; it
// reports whether cond held.
func (g *Group[S, C]) WaitFor(limit time.Duration, cond func() bool) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		// Take the channels before checking: a change after the check
		// closes one of them.
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer.C)}}
		for _, s := range g.Servers {
			if !s.Closed() {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(s.Changed())})
			}
		}
		if cond() {
			return true
		}
		if chosen, _, _ := reflect.Select(cases); chosen == 0 {
			return cond()
		}
	}
}

// Leader waits for a leader among the running servers and returns its
// index.
func (g *Group[S, C]) Leader() int {
	g.TB.Helper()
	leader := -1
	if !g.WaitFor(10*time.Second, func() bool {
		for i, s := range g.Servers {
			if !s.Closed() && s.IsLeader() {
				leader = i
				return true
			}
		}
		return false
	}) {
		g.TB.Fatal("no leader within 10s")
	}
	return leader
}

// Members counts the voters and non-voters in a running leader's
// configuration (waiting for a leader).
func (g *Group[S, C]) Members() (voters, nonVoters int) {
	g.TB.Helper()
	v, o, err := g.Servers[g.Leader()].RaftConfiguration()
	if err != nil {
		g.TB.Fatalf("the leader's configuration: %v", err)
	}
	return len(v), len(o)
}

// WaitMembers waits until a leader's configuration has the given numbers
// of voters and non-voters.
func (g *Group[S, C]) WaitMembers(voters, nonVoters int) {
	g.TB.Helper()
	var v, o []string
	if !g.WaitFor(20*time.Second, func() bool {
		for _, s := range g.Servers {
			if !s.Closed() && s.IsLeader() {
				var err error
				v, o, err = s.RaftConfiguration()
				return err == nil && len(v) == voters && len(o) == nonVoters
			}
		}
		return false
	}) {
		g.TB.Fatalf("cluster has voters %v and non-voters %v, want %d and %d", v, o, voters, nonVoters)
	}
}

// ZKAddrs are the ZooKeeper protocol addresses of the running servers.
func (g *Group[S, C]) ZKAddrs() []string { return g.running(S.ZKAddr) }

// Addrs are the gRPC addresses of the running servers.
func (g *Group[S, C]) Addrs() []string { return g.running(S.GRPCAddr) }

func (g *Group[S, C]) running(addr func(S) string) []string {
	var out []string
	for _, s := range g.Servers {
		if !s.Closed() {
			out = append(out, addr(s))
		}
	}
	return out
}

// Logger is a server's logger in a test: to the test's log when
// COORD_TEST_LOG is set, nowhere otherwise (raft is chatty); it stops
// writing when the test ends.
func Logger(tb TB, id string) *slog.Logger {
	if os.Getenv("COORD_TEST_LOG") == "" {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	w := &tbWriter{tb: tb}
	tb.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})).With("id", id)
}

type tbWriter struct {
	mu   sync.Mutex
	tb   TB
	done bool
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.tb.Log(string(p))
	}
	return len(p), nil
}
