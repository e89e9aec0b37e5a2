package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// Sequential is the sequential-create workload: workers create persistent
// sequential znodes under one parent. The checker: acknowledged names are
// unique; a create acknowledged before another was invoked has the smaller
// sequence number (invariant 5 in real time); every acknowledged create is
// there at the end (invariant 1); and the names no one saw acknowledged are
// no more than the indeterminate creates.
type Sequential struct {
	Workers int
}

const sequentialRoot = "/jepsen/seq"

func (w *Sequential) Name() string { return "sequential" }

func (w *Sequential) Setup(ctx context.Context, env *Env) error {
	return env.retry(ctx, func(conn *zk.Conn) error { return ensurePath(conn, sequentialRoot) })
}

func (w *Sequential) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) {
		var conn *zk.Conn
		defer func() {
			if conn != nil {
				conn.Close()
			}
		}()
		process := worker
		for ctx.Err() == nil {
			if conn == nil {
				c, err := env.dial(ctx, env.Addrs, nil)
				if err != nil {
					continue
				}
				conn = c
			}
			op := Op{Workload: w.Name(), Process: process, F: "create", Invoke: env.History.Now()}
			var path string // the call's own until it returns (it may outlive a timeout)
			err := env.call(ctx, conn, func(conn *zk.Conn) error {
				p, err := conn.Create(sequentialRoot+"/n-", nil, zk.FlagSequence, zk.WorldACL(zk.PermAll))
				path = p
				return err
			})
			if err == nil {
				op.Path = path
			}
			op.Complete, op.Outcome, op.Err = env.History.Now(), outcome(err), errString(err)
			env.History.Add(op)
			if op.Outcome == Info {
				process += w.Workers
				conn.Close()
				conn = nil
			}
		}
	})
}

func seqOf(name string) (int64, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[i+1:], 10, 64)
	return n, err == nil
}

func (w *Sequential) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	v := Verdict{Checker: w.Name(), Result: Pass}
	var final []string
	err := env.retry(ctx, func(conn *zk.Conn) error {
		if _, err := conn.Sync(sequentialRoot); err != nil {
			return err
		}
		var err error
		final, _, err = conn.Children(sequentialRoot)
		return err
	})
	if err != nil {
		v.Result, v.Summary = Unknown, "cannot read the final children: "+err.Error()
		return v
	}
	present := map[string]bool{}
	for _, c := range final {
		present[sequentialRoot+"/"+c] = true
	}
	var acked []Op
	seen := map[string]int{}
	for _, op := range ops {
		if op.Outcome != OK {
			continue
		}
		acked = append(acked, op)
		if p, ok := seen[op.Path]; ok {
			v.Details = append(v.Details, fmt.Sprintf("%s acknowledged to processes %d and %d", op.Path, p, op.Process))
		}
		seen[op.Path] = op.Process
		if !present[op.Path] {
			v.Details = append(v.Details, fmt.Sprintf("acknowledged create %s (process %d, at %v) is lost", op.Path, op.Process, time.Duration(op.Complete)))
		}
		if _, ok := seqOf(op.Path); !ok {
			v.Details = append(v.Details, fmt.Sprintf("%s has no sequence number", op.Path))
		}
	}
	// Real-time order: sweep by invocation, keeping the completed create
	// with the largest sequence number.
	byComplete := append([]Op(nil), acked...)
	sort.Slice(byComplete, func(i, j int) bool { return byComplete[i].Complete < byComplete[j].Complete })
	byInvoke := append([]Op(nil), acked...)
	sort.Slice(byInvoke, func(i, j int) bool { return byInvoke[i].Invoke < byInvoke[j].Invoke })
	k, maxSeq, maxOp := 0, int64(-1), Op{}
	for _, b := range byInvoke {
		for k < len(byComplete) && byComplete[k].Complete < b.Invoke {
			if s, _ := seqOf(byComplete[k].Path); s > maxSeq {
				maxSeq, maxOp = s, byComplete[k]
			}
			k++
		}
		if s, _ := seqOf(b.Path); maxSeq >= 0 && s <= maxSeq {
			v.Details = append(v.Details, fmt.Sprintf("%s (invoked %v) is not after %s (acknowledged %v)", b.Path, time.Duration(b.Invoke), maxOp.Path, time.Duration(maxOp.Complete)))
		}
	}
	unacked := len(final) - (len(acked) - countMissing(acked, present))
	if info := countOutcome(ops, Info); unacked > info {
		v.Details = append(v.Details, fmt.Sprintf("%d names no one saw acknowledged, but only %d creates were indeterminate", unacked, info))
	}
	if len(v.Details) > 0 {
		v.Result = Failed
		if len(v.Details) > 20 {
			v.Details = append(v.Details[:20], fmt.Sprintf("... and %d more", len(v.Details)-20))
		}
	}
	v.Summary = fmt.Sprintf("%d creates (%d acknowledged, %d indeterminate), %d names at the end", len(ops), len(acked), countOutcome(ops, Info), len(final))
	return v
}

func countMissing(acked []Op, present map[string]bool) int {
	n := 0
	for _, op := range acked {
		if !present[op.Path] {
			n++
		}
	}
	return n
}
