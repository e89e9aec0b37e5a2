package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
)

// RYW is the read-your-writes workload, through go-zookeeper. Worker i owns
// the znode /jepsen/ryw/w<i> and talks to one server only, server i mod n
// (followers and observers included, which is where a session's own write
// can be missing: a write is forwarded to the leader, and the server the
// session is on must have applied it before it answers). Over and over it
// sets its znode to the next of its values (setData, any version) and, once
// that is acknowledged, reads it back on the same session with a plain
// getData: no sync. A worker whose operation is indeterminate goes on as a
// new process on a new session.
//
// The checker: a read never returns an older value than the last write its
// own session had acknowledged before it (ZooKeeper's read-your-writes,
// DESIGN.md "A write, end to end", step 6). Values grow per worker, so
// "older" is "smaller"; a smaller value that an indeterminate write of the
// worker carried proves nothing (that write may have landed late) and is
// not counted.
type RYW struct {
	Workers int
}

const rywRoot = "/jepsen/ryw"

func (w *RYW) Name() string { return "ryw" }

func (w *RYW) key(worker int) string { return fmt.Sprintf("%s/w%d", rywRoot, worker) }

func (w *RYW) Setup(ctx context.Context, env *Env) error {
	return env.retry(ctx, func(conn *zk.Conn) error {
		if err := ensurePath(conn, rywRoot); err != nil {
			return err
		}
		for i := 0; i < w.Workers; i++ {
			if _, err := conn.Create(w.key(i), []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				return err
			}
		}
		return nil
	})
}

func (w *RYW) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) { w.worker(ctx, env, worker) })
}

func (w *RYW) worker(ctx context.Context, env *Env, worker int) {
	addrs := []string{env.Addrs[worker%len(env.Addrs)]}
	key := w.key(worker)
	process := worker
	value := int64(0)
	var conn *zk.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	// next drops the session: the worker goes on as a new process.
	next := func() {
		conn.Close()
		conn = nil
		process += w.Workers
	}
	for ctx.Err() == nil {
		if conn == nil {
			c, err := env.dial(ctx, addrs, nil)
			if err != nil {
				continue
			}
			conn = c
		}
		sid := conn.SessionID()
		value++
		op := Op{Workload: w.Name(), Process: process, F: "write", Key: key, Value: value, Session: sid, Invoke: env.History.Now()}
		v := value
		err := env.call(ctx, conn, func(conn *zk.Conn) error {
			_, err := conn.Set(key, []byte(strconv.FormatInt(v, 10)), -1)
			return err
		})
		op.Complete, op.Outcome, op.Err = env.History.Now(), outcome(err), errString(err)
		env.History.Add(op)
		if err != nil || conn.SessionID() != sid {
			next()
			continue
		}

		op = Op{Workload: w.Name(), Process: process, F: "read", Key: key, Session: sid, Invoke: env.History.Now()}
		var data []byte
		err = env.call(ctx, conn, func(conn *zk.Conn) error {
			d, _, err := conn.Get(key)
			data = d
			return err
		})
		op.Complete = env.History.Now()
		if err != nil || conn.SessionID() != sid {
			op.Outcome, op.Err = Info, errString(err)
			env.History.Add(op)
			next()
			continue
		}
		n, perr := strconv.ParseInt(string(data), 10, 64)
		if perr != nil {
			op.Outcome, op.Err = Info, fmt.Sprintf("unparsable value %q", data)
		} else {
			op.Outcome, op.OutValue = OK, n
		}
		env.History.Add(op)
	}
}

func (w *RYW) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	sort.Slice(ops, func(i, j int) bool { return ops[i].Invoke < ops[j].Invoke })
	v := Verdict{Checker: w.Name(), Result: Pass}
	indeterminate := map[string]map[int64]bool{} // key -> values of indeterminate writes
	for _, op := range ops {
		if op.F == "write" && op.Outcome == Info {
			if indeterminate[op.Key] == nil {
				indeterminate[op.Key] = map[int64]bool{}
			}
			indeterminate[op.Key][op.Value] = true
		}
	}
	// A process's operations run one after another on one session, so in
	// invocation order each read follows every write it must see.
	lastAck := map[int]Op{}
	writes, reads := 0, 0
	for _, op := range ops {
		switch {
		case op.F == "write" && op.Outcome == OK:
			writes++
			lastAck[op.Process] = op
		case op.F == "read" && op.Outcome == OK:
			reads++
			last, ok := lastAck[op.Process]
			if !ok || op.OutValue >= last.Value || indeterminate[op.Key][op.OutValue] {
				continue
			}
			v.Details = append(v.Details, fmt.Sprintf(
				"process %d, session 0x%x: read %s = %d at %v, but its own write of %d was acknowledged at %v",
				op.Process, op.Session, op.Key, op.OutValue, time.Duration(op.Invoke).Round(time.Millisecond), last.Value, time.Duration(last.Complete).Round(time.Millisecond)))
		}
	}
	violations := len(v.Details)
	switch {
	case violations > 0:
		v.Result = Failed
	case reads == 0:
		v.Result = Unknown
		v.Details = append(v.Details, "no read completed")
	}
	v.Summary = fmt.Sprintf("%d acknowledged writes, %d reads, %d violations", writes, reads, violations)
	if violations > 20 {
		v.Details = append(v.Details[:20:20], fmt.Sprintf("... and %d more", violations-20))
	}
	return v
}
