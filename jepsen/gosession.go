package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"coord/vocab"
)

// GoSessions is the session workload on coord's own Go client (gRPC). Each
// worker keeps one session for as long as it lives (the client re-attaches
// it to another server when its server is killed, restarted or paused)
// and, on it, writes unique values to a few shared znodes (setData -1) and
// reads them back with plain getData, never sync. A stream interceptor
// records the zxid of every message the servers send the session.
//
// The checker (invariant 2 and DESIGN.md's reads, judged per session):
//   - zxids never go back: the zxids of the connected and response
//     messages a session receives (each server's last applied zxid when it
//     took the session or answered) never decrease, across server moves too;
//     and the zxids of its acknowledged writes strictly increase;
//   - read-your-writes and monotonic reads: let seen be the largest zxid the
//     session had received (in any message, or as the Mzxid of its own
//     acknowledged ops) before it sent a read of key K. The server that
//     answers has applied at least seen, so the read must reflect every
//     acknowledged write to K (by any session) whose zxid is at most seen: a
//     read whose Mzxid is below such a write's zxid is a violation. This
//     covers a session's own write (read-your-writes, also after it moved
//     servers) and anything it read before (monotonic reads);
//   - a read returning the Mzxid of an acknowledged write returns that
//     write's value.
//
// Indeterminate writes (timeouts, connection loss) are not used: their
// zxid is unknown.
type GoSessions struct {
	Keys    int
	Workers int

	next atomic.Int64
	mu   sync.Mutex
	taps []*zxidTap
}

const goSessionsRoot = "/jepsen/gosessions"

func (w *GoSessions) Name() string { return "gosessions" }

func (w *GoSessions) key(i int) string { return fmt.Sprintf("%s/k%d", goSessionsRoot, i) }

func (w *GoSessions) Setup(ctx context.Context, env *Env) error {
	w.taps = nil
	return env.retry(ctx, func(conn *zk.Conn) error {
		if err := ensurePath(conn, goSessionsRoot); err != nil {
			return err
		}
		for i := 0; i < w.Keys; i++ {
			if _, err := conn.Create(w.key(i), []byte("0"), 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				return err
			}
		}
		return nil
	})
}

func (w *GoSessions) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) { w.worker(ctx, env, worker) })
}

func (w *GoSessions) worker(ctx context.Context, env *Env, worker int) {
	r := env.rng(w.Name(), worker)
	for process := worker; ctx.Err() == nil; process += w.Workers {
		g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, false)
		if err != nil {
			continue
		}
		w.mu.Lock()
		w.taps = append(w.taps, g.tap)
		w.mu.Unlock()
		sid := g.SessionID()
		for ctx.Err() == nil {
			key := w.key(r.Intn(w.Keys))
			op := Op{Workload: w.Name(), Process: process, Key: key, Session: sid}
			octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
			var st vocab.Stat
			if r.Intn(2) == 0 {
				op.F, op.Value, op.Version = "write", w.next.Add(1), -1
				op.Invoke = env.History.Now()
				st, err = g.Set(octx, key, []byte(strconv.FormatInt(op.Value, 10)), -1)
				op.Complete, op.Outcome = env.History.Now(), goOutcome(err)
			} else {
				op.F = "read"
				op.Invoke = env.History.Now()
				var data []byte
				data, st, err = g.Get(octx, key)
				op.Complete, op.Outcome = env.History.Now(), OK
				if err == nil {
					op.OutValue, err = strconv.ParseInt(string(data), 10, 64)
				}
				if err != nil {
					op.Outcome = Fail
				}
			}
			cancel()
			op.Server, op.Err = g.Server(), errString(err)
			if op.Outcome == OK {
				op.OutVersion, op.Zxid = st.Version, st.Mzxid
			}
			env.History.Add(op)
			if goEnded(err) {
				break
			}
		}
		env.closeGo(g)
	}
}

func (w *GoSessions) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	w.mu.Lock()
	var obs []zxidObs
	for _, t := range w.taps {
		obs = append(obs, t.Obs()...)
	}
	sessions := len(w.taps)
	w.mu.Unlock()
	v := Verdict{Checker: w.Name(), Result: Pass}
	vs := checkZxidOrder(ops, obs)
	vs = append(vs, checkSessionReads(ops, obs)...)
	if len(vs) > 0 {
		v.Result = Failed
		v.Details = violationDetails(vs, 20)
	}
	reads, moves := 0, countMoves(obs)
	for _, op := range ops {
		if op.F == "read" && op.Outcome == OK {
			reads++
		}
	}
	v.Summary = fmt.Sprintf("%d sessions, %d server moves, %d operations (%d ok reads, %d indeterminate writes), %d messages tapped, %d violations",
		sessions, moves, len(ops), reads, countOutcome(ops, Info), len(obs), len(vs))
	return v
}

// bySession groups messages by session, each in receipt order.
func bySession(obs []zxidObs) map[int64][]zxidObs {
	m := map[int64][]zxidObs{}
	for _, o := range obs {
		m[o.Session] = append(m[o.Session], o)
	}
	for _, l := range m {
		sort.SliceStable(l, func(i, j int) bool { return l[i].At < l[j].At })
	}
	return m
}

// countMoves counts re-attaches of a session to a server other than the
// one it was on.
func countMoves(obs []zxidObs) int {
	n := 0
	for _, l := range bySession(obs) {
		last := ""
		for _, o := range l {
			if o.Kind != "connected" {
				continue
			}
			if last != "" && o.Server != last {
				n++
			}
			last = o.Server
		}
	}
	return n
}

// unstamped is an error response without a zxid. coord answered a request
// it gave up on (ConnectionLoss, the connection closing) with zxid 0 until
// the gosessions checker flagged it; it now carries the server's last zxid,
// so only a response the client library makes up itself is unstamped.
func unstamped(o zxidObs) bool {
	return o.Kind == "response" && o.Err != 0 && o.Zxid == 0 && o.Server == ""
}

// checkZxidOrder: per session, the zxids of connected and response
// messages never decrease, and the zxids of acknowledged writes strictly
// increase.
func checkZxidOrder(ops []Op, obs []zxidObs) []violation {
	var vs []violation
	sessions := bySession(obs)
	ids := sortedKeys(sessions)
	for _, sid := range ids {
		var prev *zxidObs
		var recent []string
		for _, o := range sessions[sid] {
			if o.Kind == "event" || unstamped(o) {
				continue
			}
			recent = append(recent, "  "+o.String())
			if prev != nil && o.Zxid < prev.Zxid {
				// The sub-history: the two messages and what came between.
				start := len(recent) - 2
				for start > 0 && recent[start] != "  "+prev.String() {
					start--
				}
				vs = append(vs, violation{
					What: fmt.Sprintf("session 0x%x: zxid went back from 0x%x (%s from %s at %.3fs) to 0x%x (%s from %s at %.3fs)",
						sid, prev.Zxid, prev.Kind, prev.Server, secs(prev.At), o.Zxid, o.Kind, o.Server, secs(o.At)),
					Sub: append([]string(nil), recent[start:]...),
				})
			}
			if prev == nil || o.Zxid >= prev.Zxid {
				p := o
				prev = &p
			}
		}
	}
	bySess := map[int64][]Op{}
	for _, op := range ops {
		if op.F == "write" && op.Outcome == OK {
			bySess[op.Session] = append(bySess[op.Session], op)
		}
	}
	for _, sid := range sortedKeys(bySess) {
		l := bySess[sid]
		sort.Slice(l, func(i, j int) bool { return l[i].Invoke < l[j].Invoke })
		for i := 1; i < len(l); i++ {
			if l[i].Zxid <= l[i-1].Zxid {
				vs = append(vs, violation{
					What: fmt.Sprintf("session 0x%x: write at %.3fs got zxid 0x%x, not after its earlier write's 0x%x", sid, secs(l[i].Invoke), l[i].Zxid, l[i-1].Zxid),
					Sub:  describeOps(l[i-1 : i+1]),
				})
			}
		}
	}
	return vs
}

// checkSessionReads is the read-your-writes and monotonic-reads check (see
// GoSessions).
func checkSessionReads(ops []Op, obs []zxidObs) []violation {
	// Every acknowledged write per key, by zxid.
	writes := map[string][]Op{}
	byZxid := map[int64]Op{}
	for _, op := range ops {
		if op.F == "write" && op.Outcome == OK {
			writes[op.Key] = append(writes[op.Key], op)
			byZxid[op.Zxid] = op
		}
	}
	for _, l := range writes {
		sort.Slice(l, func(i, j int) bool { return l[i].Zxid < l[j].Zxid })
	}
	sessions := map[int64][]Op{}
	for _, op := range ops {
		sessions[op.Session] = append(sessions[op.Session], op)
	}
	msgs := bySession(obs)
	var vs []violation
	for _, sid := range sortedKeys(sessions) {
		l := sessions[sid]
		sort.SliceStable(l, func(i, j int) bool { return l[i].Invoke < l[j].Invoke })
		seen, seenWhy := int64(0), ""
		ms, k := msgs[sid], 0
		for i, op := range l {
			for ; k < len(ms) && ms[k].At < op.Invoke; k++ {
				if ms[k].Kind != "event" && !unstamped(ms[k]) && ms[k].Zxid > seen {
					seen, seenWhy = ms[k].Zxid, ms[k].String()
				}
			}
			if op.Outcome != OK {
				continue
			}
			if op.F == "read" {
				if w, ok := byZxid[op.Zxid]; ok && w.Key == op.Key && w.Value != op.OutValue {
					vs = append(vs, violation{
						What: fmt.Sprintf("session 0x%x read %s = %d with zxid 0x%x, but the write with that zxid wrote %d", sid, op.Key, op.OutValue, op.Zxid, w.Value),
						Sub:  describeOps([]Op{w, op}),
					})
				}
				// The newest acknowledged write to the key at or below seen.
				ws := writes[op.Key]
				j := sort.Search(len(ws), func(j int) bool { return ws[j].Zxid > seen }) - 1
				if j >= 0 && ws[j].Zxid > op.Zxid {
					w := ws[j]
					kind := "monotonic reads"
					if w.Session == sid {
						kind = "read-your-writes"
					}
					// The sub-history: this session's ops on the key from
					// the first one that saw the write (or since it began)
					// to the read, and the write itself.
					var sub []Op
					for _, p := range l[:i+1] {
						if p.Key == op.Key && (p.Outcome == OK || p.Session == w.Session) && p.Invoke >= min(w.Invoke, op.Invoke) {
							sub = append(sub, p)
						}
					}
					if w.Session != sid {
						sub = append(sub, w)
					}
					lines := describeOps(sub)
					if seenWhy != "" {
						lines = append(lines, "  session had received: "+seenWhy)
					}
					vs = append(vs, violation{
						What: fmt.Sprintf("%s: session 0x%x read %s at %.3fs from %s and got zxid 0x%x (value %d), older than the acknowledged write of %d at zxid 0x%x (session 0x%x), though it had already seen zxid 0x%x",
							kind, sid, op.Key, secs(op.Invoke), op.Server, op.Zxid, op.OutValue, w.Value, w.Zxid, w.Session, seen),
						Sub: lines,
					})
				}
			}
			if op.Zxid > seen {
				seen, seenWhy = op.Zxid, describeOp(op)
			}
		}
	}
	return vs
}

func sortedKeys[V any](m map[int64]V) []int64 {
	var ks []int64
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}
