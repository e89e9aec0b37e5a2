package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/recipes"
	"coord/recipes/coordconn"
)

// Queue is the recipes.Queue workload: workers on coord's Go client
// (recipes/coordconn) offer unique integers and poll items, half and half;
// after the run the checker drains the queue with Poll until it is empty.
//
// An enqueue is ok (Offer returned), fail (never: an Offer error is not
// definite) or info. A dequeue is ok (Poll returned an item), fail
// (ErrEmpty: the queue was empty, nothing taken) or info (an error: the
// take may have happened, its item lost with the answer, or be found by
// the next take on the session).
//
// The checker:
//   - no item is dequeued twice (ok dequeues and the drain together);
//   - no item is dequeued that nobody enqueued (ok or info);
//   - every acknowledged enqueue is dequeued (by a worker or by the
//     drain), except that as many items may be missing as there were
//     indeterminate dequeues (each may have taken one item whose answer was
//     lost);
//   - indeterminate enqueues are dequeued at most once (by the first rule).
type Queue struct {
	Workers int

	next atomic.Int64
}

const queueDir = "/jepsen/queue"

func (w *Queue) Name() string { return "queue" }

func (w *Queue) Setup(ctx context.Context, env *Env) error {
	return env.retry(ctx, func(conn *zk.Conn) error { return ensurePath(conn, queueDir) })
}

func (w *Queue) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) {
		r := env.rng(w.Name(), worker)
		for process := worker; ctx.Err() == nil; process += w.Workers {
			g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, true)
			if err != nil {
				continue
			}
			a := coordconn.New(g.Conn, g.relay)
			q := recipes.NewQueue(a, queueDir)
			for ctx.Err() == nil {
				op := Op{Workload: w.Name(), Process: process, Session: g.SessionID()}
				octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
				if r.Intn(2) == 0 {
					op.F, op.Value = "enqueue", w.next.Add(1)
					op.Invoke = env.History.Now()
					_, err = q.Offer(octx, []byte(strconv.FormatInt(op.Value, 10)))
					op.Outcome = OK
					if err != nil {
						op.Outcome = Info
					}
				} else {
					op.F = "dequeue"
					op.Invoke = env.History.Now()
					var data []byte
					data, err = q.Poll(octx)
					switch {
					case err == nil:
						op.Outcome = OK
						op.OutValue, err = strconv.ParseInt(string(data), 10, 64)
						if err != nil {
							op.Err = fmt.Sprintf("item %q", data)
						}
					case errors.Is(err, recipes.ErrEmpty):
						op.Outcome = Fail
					default:
						op.Outcome = Info
					}
				}
				cancel()
				op.Complete = env.History.Now()
				if op.Err == "" {
					op.Err = errString(err)
				}
				env.History.Add(op)
				if op.Outcome == Info {
					break // a new session: the item an info take claimed stays with this one
				}
			}
			cctx, cancel := context.WithTimeout(context.Background(), env.OpTimeout)
			a.Close(cctx)
			cancel()
		}
	})
}

func (w *Queue) Check(ctx context.Context, env *Env) Verdict {
	v := Verdict{Checker: w.Name()}
	drained, err := w.drain(ctx, env)
	ops := env.History.Ops(w.Name())
	if err != nil {
		v.Result, v.Summary = Unknown, "cannot drain the queue: "+err.Error()
		return v
	}
	v.Result = Pass
	vs := checkQueue(ops)
	if len(vs) > 0 {
		v.Result = Failed
		v.Details = violationDetails(vs, 20)
	}
	enq, deq := 0, 0
	for _, op := range ops {
		if op.Outcome == OK && op.F == "enqueue" {
			enq++
		}
		if op.Outcome == OK && op.F == "dequeue" {
			deq++
		}
	}
	v.Summary = fmt.Sprintf("%d operations: %d acknowledged enqueues, %d ok dequeues, %d indeterminate; %d items drained at the end; %d violations",
		len(ops), enq, deq, countOutcome(ops, Info), len(drained), len(vs))
	return v
}

// drain polls the queue empty on fresh sessions; an item whose poll
// failed half-way may be lost to the drain as to any taker, so a failed
// poll is counted as an indeterminate dequeue in the history.
func (w *Queue) drain(ctx context.Context, env *Env) ([]int64, error) {
	var out []int64
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, true)
		if err != nil {
			continue
		}
		a := coordconn.New(g.Conn, g.relay)
		q := recipes.NewQueue(a, queueDir)
		for {
			op := Op{Workload: w.Name(), Process: -1, F: "dequeue", Session: g.SessionID(), Invoke: env.History.Now()}
			octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
			data, err := q.Poll(octx)
			cancel()
			op.Complete = env.History.Now()
			if errors.Is(err, recipes.ErrEmpty) {
				cctx, cancel := context.WithTimeout(context.Background(), env.OpTimeout)
				a.Close(cctx)
				cancel()
				return out, nil
			}
			if err != nil {
				op.Outcome, op.Err = Info, err.Error()
				env.History.Add(op)
				break
			}
			n, perr := strconv.ParseInt(string(data), 10, 64)
			op.Outcome, op.OutValue = OK, n
			if perr != nil {
				op.Err = fmt.Sprintf("item %q", data)
			}
			env.History.Add(op)
			out = append(out, n)
		}
		cctx, cancel := context.WithTimeout(context.Background(), env.OpTimeout)
		a.Close(cctx)
		cancel()
	}
	return out, errors.New("still not empty after a minute")
}

// checkQueue is the queue checker (see Queue); the drain's dequeues are
// in ops (process -1).
func checkQueue(ops []Op) []violation {
	enq := map[int64]Op{}
	var acked []int64
	infoDeq := 0
	taken := map[int64][]Op{}
	for _, op := range ops {
		switch {
		case op.F == "enqueue" && op.Outcome != Fail:
			enq[op.Value] = op
			if op.Outcome == OK {
				acked = append(acked, op.Value)
			}
		case op.F == "dequeue" && op.Outcome == OK:
			taken[op.OutValue] = append(taken[op.OutValue], op)
		case op.F == "dequeue" && op.Outcome == Info:
			infoDeq++
		}
	}
	var vs []violation
	var items []int64
	for item := range taken {
		items = append(items, item)
	}
	sort.Slice(items, func(i, j int) bool { return items[i] < items[j] })
	for _, item := range items {
		ts := taken[item]
		e, ok := enq[item]
		if !ok {
			vs = append(vs, violation{What: fmt.Sprintf("item %d dequeued but never enqueued", item), Sub: describeOps(ts)})
			continue
		}
		if len(ts) > 1 {
			vs = append(vs, violation{What: fmt.Sprintf("item %d (enqueue %s) dequeued %d times", item, e.Outcome, len(ts)),
				Sub: describeOps(append([]Op{e}, ts...))})
		}
	}
	var missing []Op
	sort.Slice(acked, func(i, j int) bool { return acked[i] < acked[j] })
	for _, item := range acked {
		if len(taken[item]) == 0 {
			missing = append(missing, enq[item])
		}
	}
	if len(missing) > infoDeq {
		sub := describeOps(missing)
		vs = append(vs, violation{
			What: fmt.Sprintf("%d acknowledged enqueues never dequeued (not even by the final drain), but only %d dequeues were indeterminate", len(missing), infoDeq),
			Sub:  limitDetails(sub, 20),
		})
	}
	return vs
}
