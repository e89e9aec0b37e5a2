package jepsen

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"
)

// Register is the linearizable-register workload: a few znodes, each an
// integer register with a version. A read is sync then getData (ZooKeeper's
// plain reads are only sequentially consistent; a sync first makes the
// read see every write acknowledged before the sync was sent), a write is
// setData with version -1, a compare-and-set is setData with the version
// the worker last read. Values written are unique in the run.
//
// The keys are renewed every KeyLife (default 10 s): the workers move on to
// fresh znodes, so each key's history stays short enough for porcupine
// however long the run (a 30-minute run with one set of keys held 140,000
// operations a key and porcupine gave up), and an indeterminate write
// stays open only in its own key's history.
type Register struct {
	Keys    int
	Workers int
	KeyLife time.Duration

	next atomic.Int64
}

const registerRoot = "/jepsen/register"

func (w *Register) Name() string { return "register" }

// key is register i of generation gen.
func (w *Register) key(gen int64, i int) string {
	return fmt.Sprintf("%s/g%d-k%d", registerRoot, gen, i)
}

// generation is the key generation at history time now.
func (w *Register) generation(now int64) int64 {
	life := w.KeyLife
	if life <= 0 {
		life = 10 * time.Second
	}
	return now / int64(life)
}

func (w *Register) Setup(ctx context.Context, env *Env) error {
	return env.retry(ctx, func(conn *zk.Conn) error {
		if err := ensurePath(conn, registerRoot); err != nil {
			return err
		}
		for i := 0; i < w.Keys; i++ {
			if _, err := conn.Create(w.key(0, i), []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				return err
			}
		}
		return nil
	})
}

func (w *Register) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) { w.worker(ctx, env, worker) })
}

func (w *Register) worker(ctx context.Context, env *Env, worker int) {
	r := env.rng(w.Name(), worker)
	process := worker
	lastVersion := map[string]int32{}
	made := map[string]bool{}
	var conn *zk.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	for ctx.Err() == nil {
		if conn == nil {
			c, err := env.dial(ctx, env.Addrs, nil)
			if err != nil {
				continue
			}
			conn = c
		}
		key := w.key(w.generation(env.History.Now()), r.Intn(w.Keys))
		if !made[key] {
			// A new generation's register starts as a fresh znode holding
			// 0 at version 0, the model's initial state; made outside the
			// history. An op of another worker that reaches it first fails
			// NoNode and did not happen.
			err := env.call(ctx, conn, func(conn *zk.Conn) error {
				_, err := conn.Create(key, []byte("0"), 0, zk.WorldACL(zk.PermAll))
				if errors.Is(err, zk.ErrNodeExists) {
					err = nil
				}
				return err
			})
			if err != nil {
				conn.Close()
				conn = nil
				continue
			}
			made[key] = true
		}
		op := Op{Workload: w.Name(), Process: process, Key: key}
		var err error
		switch p := r.Intn(4); {
		case p < 2:
			op.F = "read"
			op.Invoke = env.History.Now()
			// The call's results are its own until it returns: after a
			// timeout it may still run, and must not touch op.
			var outValue int64
			var outVersion int32
			err = env.call(ctx, conn, func(conn *zk.Conn) error {
				if _, err := conn.Sync(key); err != nil {
					return err
				}
				data, st, err := conn.Get(key)
				if err != nil {
					return err
				}
				v, err := strconv.ParseInt(string(data), 10, 64)
				if err != nil {
					return fmt.Errorf("register %s holds %q", key, data)
				}
				outValue, outVersion = v, st.Version
				return nil
			})
			if err == nil {
				op.OutValue, op.OutVersion = outValue, outVersion
				lastVersion[key] = op.OutVersion
			}
		default:
			op.F, op.Version = "write", -1
			if p == 3 {
				op.F, op.Version = "cas", lastVersion[key]
			}
			op.Value = w.next.Add(1)
			op.Invoke = env.History.Now()
			value, version := op.Value, op.Version
			var outVersion int32
			err = env.call(ctx, conn, func(conn *zk.Conn) error {
				st, err := conn.Set(key, []byte(strconv.FormatInt(value, 10)), version)
				if err == nil {
					outVersion = st.Version
				}
				return err
			})
			if err == nil {
				op.OutVersion = outVersion
				lastVersion[key] = op.OutVersion
			}
		}
		op.Complete = env.History.Now()
		op.Outcome, op.Err = outcome(err), errString(err)
		if op.F == "read" && err != nil {
			op.Outcome = Fail // a failed read changed nothing
		}
		env.History.Add(op)
		if op.Outcome == Info {
			// The operation may still take effect: this process stays
			// open forever, and the worker goes on as a new process on a
			// new session.
			process += w.Workers
			conn.Close()
			conn = nil
		}
	}
}

// registerState is the model's state: a register's value and version.
type registerState struct {
	Value   int64
	Version int32
}

type registerIn struct {
	F       string
	Value   int64
	Version int32
}

type registerOut struct {
	Outcome Outcome
	Value   int64
	Version int32
}

// registerModel is the register as porcupine sees it, one partition per
// key. An indeterminate write returns at the end of the history: it may be
// linearized anywhere after its invocation, or at the very end where it
// changes nothing that was observed.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Metadata.(string)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return registerState{} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(registerState), input.(registerIn), output.(registerOut)
		next := registerState{Value: in.Value, Version: s.Version + 1}
		switch in.F {
		case "read":
			return out.Value == s.Value && out.Version == s.Version, s
		case "write":
			if out.Outcome == Info {
				return true, next
			}
			return out.Version == s.Version+1, next
		case "cas":
			match := s.Version == in.Version
			switch out.Outcome {
			case Info:
				if match {
					return true, next
				}
				return true, s
			case Fail:
				return !match, s
			}
			return match && out.Version == s.Version+1, next
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(registerIn), output.(registerOut)
		switch in.F {
		case "read":
			return fmt.Sprintf("read() -> %d@v%d", out.Value, out.Version)
		case "write":
			return fmt.Sprintf("write(%d) -> %s v%d", in.Value, out.Outcome, out.Version)
		}
		return fmt.Sprintf("cas(v%d, %d) -> %s v%d", in.Version, in.Value, out.Outcome, out.Version)
	},
	DescribeState: func(state any) string {
		s := state.(registerState)
		return fmt.Sprintf("%d@v%d", s.Value, s.Version)
	},
}

// registerOps turns the history into porcupine operations: failed reads
// are dropped, indeterminate writes return after everything else.
func registerOps(ops []Op) []porcupine.Operation {
	var end int64
	for _, op := range ops {
		end = max(end, op.Complete)
	}
	var out []porcupine.Operation
	for _, op := range ops {
		if op.F == "read" && op.Outcome != OK {
			continue
		}
		ret := op.Complete
		if op.Outcome == Info {
			ret = end + 1
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Process, Metadata: op.Key,
			Input:  registerIn{F: op.F, Value: op.Value, Version: op.Version},
			Output: registerOut{Outcome: op.Outcome, Value: op.OutValue, Version: op.OutVersion},
			Call:   op.Invoke, Return: ret,
		})
	}
	return out
}

// Check runs porcupine (bounded to a minute: a timeout is Unknown, never a
// pass) and, on a failure, writes its visualisation into the report.
func (w *Register) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	v := Verdict{Checker: w.Name()}
	hist := registerOps(ops)
	res, info := porcupine.CheckOperationsVerbose(registerModel, hist, time.Minute)
	keys := map[string]bool{}
	for _, op := range ops {
		keys[op.Key] = true
	}
	v.Summary = fmt.Sprintf("%d operations (%d checked, %d indeterminate) on %d keys", len(ops), len(hist), countOutcome(ops, Info), len(keys))
	switch res {
	case porcupine.Ok:
		v.Result = Pass
	case porcupine.Unknown:
		v.Result = Unknown
		v.Details = append(v.Details, "porcupine timed out after 1m")
	default:
		v.Result = Failed
		v.Details = append(registerSubHistory(ops), "the history is not linearizable")
		path := filepath.Join(env.Dir, "register-linearizability.html")
		if err := porcupine.VisualizePath(registerModel, info, path); err != nil {
			v.Details = append(v.Details, "visualisation: "+err.Error())
		} else {
			v.Files = append(v.Files, filepath.Base(path))
		}
	}
	return v
}

func countOutcome(ops []Op, o Outcome) int {
	n := 0
	for _, op := range ops {
		if op.Outcome == o {
			n++
		}
	}
	return n
}
