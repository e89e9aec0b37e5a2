package jepsen

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Env is what a workload gets: where the servers are, the history to
// record into and the run's knobs.
type Env struct {
	Addrs     []string
	GRPCAddrs []string // the same servers' gRPC addresses, for coord's Go client
	History   *History
	Log       *slog.Logger
	Seed      int64
	Dir       string        // the run's report directory
	OpTimeout time.Duration // an operation not answered by then is indeterminate
	// SessionTimeout is what the clients ask for.
	SessionTimeout time.Duration

	cluster *Cluster // nil: no restarts to react to
}

// onRestart registers f to be called with the ZooKeeper address of each
// server restarted during the run, as soon as its process runs.
func (e *Env) onRestart(f func(addr string)) {
	if e.cluster == nil {
		return
	}
	e.cluster.OnStart(func(i int) { f(e.cluster.Addr(i)) })
}

// rng is a worker's own seeded random source.
func (e *Env) rng(workload string, worker int) *rand.Rand {
	h := int64(0)
	for _, c := range workload {
		h = h*31 + int64(c)
	}
	return rand.New(rand.NewSource(e.Seed ^ h ^ int64(worker)*7919))
}

type zkLogger struct{}

func (zkLogger) Printf(string, ...any) {}

// dial opens a ZooKeeper session on addrs and waits, bounded by ctx and
// the op timeout, until it has one. onSession, if set, is called with the
// session id each time the connection gets a session (a new one after an
// expiry, too).
func (e *Env) dial(ctx context.Context, addrs []string, onSession func(int64)) (*zk.Conn, error) {
	return e.dialWith(ctx, addrs, onSession, nil)
}

// dialWith is dial through dialer (nil: go-zookeeper's own).
func (e *Env) dialWith(ctx context.Context, addrs []string, onSession func(int64), dialer zk.Dialer) (*zk.Conn, error) {
	ready := make(chan struct{}, 1)
	var (
		mu   sync.Mutex
		conn *zk.Conn
		last int64
	)
	report := func() {
		mu.Lock()
		defer mu.Unlock()
		if conn == nil {
			return
		}
		if id := conn.SessionID(); id != 0 && id != last {
			last = id
			if onSession != nil {
				onSession(id)
			}
		}
	}
	cb := func(ev zk.Event) {
		if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
			report()
			select {
			case ready <- struct{}{}:
			default:
			}
		}
	}
	var (
		c   *zk.Conn
		err error
	)
	if dialer != nil {
		c, _, err = zk.Connect(addrs, e.SessionTimeout, zk.WithLogger(zkLogger{}), zk.WithEventCallback(cb), zk.WithDialer(dialer))
	} else {
		c, _, err = zk.Connect(addrs, e.SessionTimeout, zk.WithLogger(zkLogger{}), zk.WithEventCallback(cb))
	}
	if err != nil {
		return nil, err
	}
	mu.Lock()
	conn = c
	mu.Unlock()
	t := time.NewTimer(2 * e.OpTimeout)
	defer t.Stop()
	select {
	case <-ready:
	case <-ctx.Done():
		c.Close()
		return nil, ctx.Err()
	case <-t.C:
		c.Close()
		return nil, fmt.Errorf("no session within %v", 2*e.OpTimeout)
	}
	report() // the first session, if the callback ran before conn was set
	return c, nil
}

// errTimeout is an operation that did not return within the op timeout.
var errTimeout = errors.New("operation timed out")

// call runs f on conn with the op timeout. On timeout f keeps running on
// its own goroutine until its connection is closed; the caller must treat
// the operation as indeterminate and close the connection. f gets conn as
// an argument so that it never reads the caller's variable, which the
// caller may set to nil or to a new connection while f still runs.
func (e *Env) call(ctx context.Context, conn *zk.Conn, f func(*zk.Conn) error) error {
	done := make(chan error, 1)
	go func() { done <- f(conn) }()
	t := time.NewTimer(e.OpTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return errTimeout
	case <-ctx.Done():
		return errTimeout
	}
}

// definite reports whether err says for sure that a write did not happen.
func definite(err error) bool {
	return errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNodeExists) ||
		errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNotEmpty) || errors.Is(err, zk.ErrBadArguments)
}

// outcome maps a write's error.
func outcome(err error) Outcome {
	switch {
	case err == nil:
		return OK
	case definite(err):
		return Fail
	}
	return Info
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ensurePath creates path and its parents as persistent znodes.
func ensurePath(conn *zk.Conn, path string) error {
	cur := ""
	for _, part := range splitPath(path) {
		cur += "/" + part
		if _, err := conn.Create(cur, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", cur, err)
		}
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	start := 1
	for i := 1; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if i > start {
				out = append(out, p[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// retry runs f until it succeeds or ctx ends, with a fresh session each
// try; for setup and final reads, which must not be indeterminate.
func (e *Env) retry(ctx context.Context, f func(conn *zk.Conn) error) error {
	var last error
	for {
		conn, err := e.dial(ctx, e.Addrs, nil)
		if err == nil {
			err = e.call(ctx, conn, f)
			conn.Close()
			if err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
