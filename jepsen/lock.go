package jepsen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/recipes"
	"coord/recipes/coordconn"
)

// Lock is the recipes.Mutex workload. Each worker has a session on coord's
// Go client (through recipes/coordconn) and a Mutex on one directory; over
// and over it locks (bounded by twice the op timeout), holds the lock for
// 10–60 ms and unlocks. A holder believes it holds the lock from the
// moment Lock returns until the first of: its hold time is up (it then
// calls Unlock), its session is suspended (Disconnected: it cannot know
// any more), or Mutex.Lost closes. At the start and at the end of that
// belief it writes its fencing token (Mutex.Token, the lock node's czxid)
// to the checker-side fenced register, which accepts a token no smaller
// than the largest it has accepted and rejects a stale one.
//
// After any error of Lock or Unlock the worker closes its session (its
// lock node goes with it) and opens a new one.
//
// The checker:
//   - mutual exclusion: two holds' belief intervals [Lock returned, belief
//     ended] never overlap, unless the earlier holder's session was lost
//     (its client saw Expired, Lost closed, or Unlock said ErrSessionLost):
//     ZooKeeper only promises at most one holder while the session lives;
//   - fencing: tokens are unique, and a hold acquired (Lock returned)
//     before another's Lock was invoked has the smaller token, lost sessions
//     or not; equivalently, with no overlap the register never rejects a
//     write, and the register rejected only writes of holders that were
//     excused.
type Lock struct {
	Workers int

	reg fencedRegister
}

const lockDir = "/jepsen/lock"

func (w *Lock) Name() string { return "lock" }

func (w *Lock) Setup(ctx context.Context, env *Env) error {
	w.reg = fencedRegister{}
	return env.retry(ctx, func(conn *zk.Conn) error { return ensurePath(conn, lockDir) })
}

// lockHold is one hold, as the checker-side register recorded it.
type lockHold struct {
	Process    int
	Session    int64
	Token      int64
	LockInvoke int64 // Lock called
	Acquired   int64 // Lock returned
	Released   int64 // the holder stopped believing it holds the lock
	Why        string
	Lost       bool // the session was lost during or right after the hold
}

func (h lockHold) String() string {
	s := fmt.Sprintf("  p%d s0x%x token 0x%x: lock invoked %.3fs, held %.3fs..%.3fs (%s)", h.Process, h.Session, h.Token,
		secs(h.LockInvoke), secs(h.Acquired), secs(h.Released), h.Why)
	if h.Lost {
		s += ", session lost"
	}
	return s
}

// fencedRegister is the resource the lock guards, kept by the checker: it
// records every hold and accepts a token write only if the token is not
// below the largest accepted.
type fencedRegister struct {
	mu       sync.Mutex
	max      int64
	holds    []lockHold
	rejected []string
}

func (r *fencedRegister) write(process int, token int64, at int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if token < r.max {
		r.rejected = append(r.rejected, fmt.Sprintf("p%d wrote stale token 0x%x at %.3fs (register at 0x%x)", process, token, secs(at), r.max))
		return false
	}
	r.max = token
	return true
}

func (r *fencedRegister) record(h lockHold) {
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

func (w *Lock) Run(ctx context.Context, env *Env) {
	runWorkers(ctx, w.Workers, func(worker int) {
		r := env.rng(w.Name(), worker)
		for process := worker; ctx.Err() == nil; process += w.Workers {
			g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, true)
			if err != nil {
				continue
			}
			a := coordconn.New(g.Conn, g.relay)
			m := recipes.NewMutex(a, lockDir, recipes.WithData([]byte(fmt.Sprint(process))))
			for ctx.Err() == nil && w.holdOnce(ctx, env, g, a, m, process, 10+r.Intn(50)) {
			}
			cctx, cancel := context.WithTimeout(context.Background(), env.OpTimeout)
			a.Close(cctx)
			cancel()
		}
	})
}

// holdOnce locks, holds and unlocks once; false: the session is done for.
func (w *Lock) holdOnce(ctx context.Context, env *Env, g *goConn, a *coordconn.Conn, m *recipes.Mutex, process, holdMs int) bool {
	sid := g.SessionID()
	h := lockHold{Process: process, Session: sid, LockInvoke: env.History.Now()}
	lctx, cancel := context.WithTimeout(ctx, 2*env.OpTimeout)
	err := m.Lock(lctx)
	cancel()
	op := Op{Workload: w.Name(), Process: process, F: "lock", Session: sid, Invoke: h.LockInvoke, Complete: env.History.Now(), Outcome: OK}
	if err != nil {
		op.Outcome, op.Err = Info, err.Error()
		env.History.Add(op)
		return false
	}
	h.Acquired, h.Token = op.Complete, m.Token()
	op.Value, op.Zxid = h.Token, h.Token
	env.History.Add(op)
	w.reg.write(process, h.Token, h.Acquired)

	state, changed := a.State()
	lost := m.Lost()
	t := time.NewTimer(time.Duration(holdMs) * time.Millisecond)
	h.Why = "unlock"
	for h.Why == "unlock" && state != recipes.StateSuspended && state.Live() {
		select {
		case <-t.C:
			goto release
		case <-lost:
			h.Why = "lost"
		case <-changed:
			state, changed = a.State()
			if state == recipes.StateSuspended || !state.Live() {
				h.Why = "session " + state.String()
			}
		case <-ctx.Done():
			goto release
		}
	}
release:
	t.Stop()
	h.Released = env.History.Now()
	w.reg.write(process, h.Token, h.Released)
	uctx, cancel := context.WithTimeout(context.Background(), env.OpTimeout)
	err = m.Unlock(uctx)
	cancel()
	op = Op{Workload: w.Name(), Process: process, F: "unlock", Session: sid, Value: h.Token, Invoke: h.Released, Complete: env.History.Now(), Outcome: OK}
	if err != nil {
		op.Outcome, op.Err = Info, err.Error()
	}
	env.History.Add(op)
	select {
	case <-lost:
		h.Lost = true
	default:
	}
	if errors.Is(err, recipes.ErrSessionLost) {
		h.Lost = true
	}
	if st, _ := a.State(); st == recipes.StateExpired {
		h.Lost = true
	}
	w.reg.record(h)
	return err == nil
}

func (w *Lock) Check(ctx context.Context, env *Env) Verdict {
	w.reg.mu.Lock()
	holds := append([]lockHold(nil), w.reg.holds...)
	rejected := append([]string(nil), w.reg.rejected...)
	w.reg.mu.Unlock()
	v := Verdict{Checker: w.Name(), Result: Pass}
	vs, excused := checkLock(holds)
	if len(vs) > 0 {
		v.Result = Failed
		v.Details = violationDetails(vs, 20)
	}
	lost := 0
	for _, h := range holds {
		if h.Lost {
			lost++
		}
	}
	v.Summary = fmt.Sprintf("%d holds (%d with the session lost), %d overlaps excused by a lost session, %d stale register writes rejected, %d violations",
		len(holds), lost, excused, len(rejected), len(vs))
	if len(rejected) > 0 && len(vs) == 0 {
		v.Details = append(v.Details, "register rejections (all excused): "+fmt.Sprint(limitDetails(rejected, 5)))
	}
	return v
}

// checkLock is the lock checker (see Lock); it also counts the overlaps a
// lost session excused.
func checkLock(holds []lockHold) ([]violation, int) {
	sort.Slice(holds, func(i, j int) bool { return holds[i].Acquired < holds[j].Acquired })
	var vs []violation
	excused := 0
	tokens := map[int64]lockHold{}
	for i, a := range holds {
		if b, ok := tokens[a.Token]; ok {
			vs = append(vs, violation{What: fmt.Sprintf("token 0x%x handed to two holds", a.Token), Sub: []string{b.String(), a.String()}})
		}
		tokens[a.Token] = a
		for _, b := range holds[i+1:] {
			if b.Acquired >= a.Released {
				// No overlap; fencing still applies below.
			} else if a.Lost {
				excused++
			} else {
				vs = append(vs, violation{
					What: fmt.Sprintf("two holders at once: p%d (token 0x%x) held until %.3fs, p%d (token 0x%x) acquired at %.3fs, and p%d's session was not lost",
						a.Process, a.Token, secs(a.Released), b.Process, b.Token, secs(b.Acquired), a.Process),
					Sub: []string{a.String(), b.String()},
				})
			}
			if a.Acquired < b.LockInvoke && b.Token <= a.Token {
				vs = append(vs, violation{
					What: fmt.Sprintf("fencing: p%d acquired with token 0x%x at %.3fs, after p%d's hold with token 0x%x was acquired (%.3fs)",
						b.Process, b.Token, secs(b.Acquired), a.Process, a.Token, secs(a.Acquired)),
					Sub: []string{a.String(), b.String()},
				})
			}
		}
	}
	return vs, excused
}
