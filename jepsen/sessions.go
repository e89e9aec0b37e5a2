package jepsen

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// Sessions is the session workload. Each worker, over and over, opens a
// client (a new zk.Conn, on all servers), creates an ephemeral, asks a few
// times whether it is there and who owns it, and closes the client; every
// third client instead vanishes without closing (its socket is cut and it
// never dials again), so its session must expire. Whenever a server is
// restarted, Racers more clients connect to that server alone the moment
// it listens, while it replays its log, and live the same life. Every
// session id a client is given is recorded, also the new ones go-zookeeper
// opens by itself after an expiry.
//
// The checker: a session id is handed to one client only in the whole run,
// across leader changes and server restarts (invariant 8: a restarted
// server never hands a client another session's id); a session reads its
// own ephemeral, owned by itself, while it lives (invariants 2 and 4); and
// once every client is closed or abandoned and the cluster has recovered,
// no ephemeral outlives its session (invariant 4).
type Sessions struct {
	Workers int
	// Racers is how many clients connect to a restarted server at once.
	Racers int

	mu      sync.Mutex
	owners  map[int64][]int // session id -> the clients given it
	next    atomic.Int64    // client numbers
	racing  sync.WaitGroup
	stopped bool
}

const sessionsRoot = "/jepsen/sessions"

func (w *Sessions) Name() string { return "sessions" }

func (w *Sessions) Setup(ctx context.Context, env *Env) error {
	w.owners = map[int64][]int{}
	return env.retry(ctx, func(conn *zk.Conn) error { return ensurePath(conn, sessionsRoot) })
}

func (w *Sessions) Run(ctx context.Context, env *Env) {
	env.onRestart(func(addr string) { w.race(ctx, env, addr) })
	runWorkers(ctx, w.Workers, func(worker int) { w.worker(ctx, env) })
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.racing.Wait()
}

func (w *Sessions) worker(ctx context.Context, env *Env) {
	for ctx.Err() == nil {
		w.client(ctx, env, int(w.next.Add(1)), env.Addrs)
	}
}

// race connects Racers clients to addr, a server just started again, as
// soon as it accepts connections: they meet it while it replays its log.
func (w *Sessions) race(ctx context.Context, env *Env, addr string) {
	w.mu.Lock()
	if w.stopped || ctx.Err() != nil {
		w.mu.Unlock()
		return
	}
	w.racing.Add(1)
	w.mu.Unlock()
	defer w.racing.Done()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	runWorkers(ctx, w.Racers, func(int) { w.client(ctx, env, int(w.next.Add(1)), []string{addr}) })
}

// abandoner is a dialer whose connections a client can cut for good: after
// abandon the client's socket is closed and it cannot dial again, so it
// never sends closeSession, as a client that crashed.
type abandoner struct {
	mu      sync.Mutex
	conn    net.Conn
	dropped bool
}

func (a *abandoner) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.dropped {
		return nil, errors.New("jepsen: client abandoned")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	a.conn = c
	return c, err
}

func (a *abandoner) abandon() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropped = true
	if a.conn != nil {
		a.conn.Close()
	}
}

// client is one client's life.
func (w *Sessions) client(ctx context.Context, env *Env, client int, addrs []string) {
	invoke := env.History.Now()
	ab := &abandoner{}
	conn, err := env.dialWith(ctx, addrs, func(id int64) {
		w.mu.Lock()
		w.owners[id] = append(w.owners[id], client)
		w.mu.Unlock()
		now := env.History.Now()
		env.History.Add(Op{Workload: w.Name(), Process: client, F: "session", Session: id, Outcome: OK, Invoke: now, Complete: now})
	}, ab.dial)
	if err != nil {
		return
	}
	abandon := client%3 == 0
	defer func() {
		if abandon {
			ab.abandon()
			op := Op{Workload: w.Name(), Process: client, F: "abandon", Session: conn.SessionID(), Outcome: OK, Invoke: env.History.Now()}
			op.Complete = op.Invoke
			env.History.Add(op)
			go conn.Close() // sends nothing: it cannot dial
			return
		}
		conn.Close()
	}()
	sid := conn.SessionID()
	env.History.Add(Op{Workload: w.Name(), Process: client, F: "open", Session: sid, Outcome: OK, Invoke: invoke, Complete: env.History.Now()})

	path := fmt.Sprintf("%s/c%d", sessionsRoot, client)
	op := Op{Workload: w.Name(), Process: client, F: "create-ephemeral", Path: path, Session: sid, Invoke: env.History.Now()}
	err = env.call(ctx, conn, func(conn *zk.Conn) error {
		_, err := conn.Create(path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		return err
	})
	op.Complete, op.Outcome, op.Err = env.History.Now(), outcome(err), errString(err)
	env.History.Add(op)
	if err != nil {
		return
	}
	for k := 0; k < 5 && ctx.Err() == nil; k++ {
		op := Op{Workload: w.Name(), Process: client, F: "own-ephemeral", Path: path, Session: sid, Invoke: env.History.Now()}
		var owner int64
		var ok bool
		err := env.call(ctx, conn, func(conn *zk.Conn) error {
			var st *zk.Stat
			var err error
			ok, st, err = conn.Exists(path)
			if ok {
				owner = st.EphemeralOwner
			}
			return err
		})
		op.Complete = env.History.Now()
		if err != nil {
			op.Outcome, op.Err = Fail, err.Error()
			env.History.Add(op)
			return
		}
		if conn.SessionID() != sid {
			return // a new session after an expiry: the ephemeral may be gone
		}
		op.Outcome, op.OutValue = OK, owner
		if !ok {
			op.OutValue = -1
		}
		env.History.Add(op)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *Sessions) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	v := Verdict{Checker: w.Name(), Result: Pass}
	w.mu.Lock()
	var dup []int64
	for id, owners := range w.owners {
		if len(owners) > 1 {
			dup = append(dup, id)
		}
	}
	sessions := len(w.owners)
	sort.Slice(dup, func(i, j int) bool { return dup[i] < dup[j] })
	for _, id := range dup {
		v.Details = append(v.Details, fmt.Sprintf("session 0x%x was handed to clients %v", id, w.owners[id]))
	}
	w.mu.Unlock()
	for _, op := range ops {
		if op.F == "own-ephemeral" && op.Outcome == OK && op.OutValue != op.Session {
			if op.OutValue == -1 {
				v.Details = append(v.Details, fmt.Sprintf("client %d: session 0x%x does not see its ephemeral %s at %v", op.Process, op.Session, op.Path, time.Duration(op.Invoke)))
			} else {
				v.Details = append(v.Details, fmt.Sprintf("client %d: ephemeral %s of session 0x%x is owned by 0x%x at %v", op.Process, op.Path, op.Session, op.OutValue, time.Duration(op.Invoke)))
			}
		}
	}
	// Every client is closed or abandoned: once the cluster has had time
	// to expire what was not closed cleanly (a session timeout and then
	// some), no ephemeral may be left.
	var left []string
	deadline := time.Now().Add(4*env.SessionTimeout + 10*time.Second)
	for {
		err := env.retry(ctx, func(conn *zk.Conn) error {
			if _, err := conn.Sync(sessionsRoot); err != nil {
				return err
			}
			var err error
			left, _, err = conn.Children(sessionsRoot)
			return err
		})
		if err != nil {
			v.Result = Unknown
			v.Details = append(v.Details, "cannot list "+sessionsRoot+": "+err.Error())
			break
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(left) > 0 {
		sort.Strings(left)
		v.Details = append(v.Details, fmt.Sprintf("ephemerals outlive their sessions: %v", left))
	}
	if len(v.Details) > 0 {
		v.Result = Failed
	}
	v.Summary = fmt.Sprintf("%d sessions, %d operations, %d violations", sessions, len(ops), len(v.Details))
	return v
}
