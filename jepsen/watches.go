package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/client"
	"coord/vocab"
)

// Watches is the watch workload, on coord's Go client (go-zookeeper
// v1.0.4 has no addWatch). Writers create, set and delete a few znodes
// under one subtree; a delete is a multi that also sets a clock znode
// outside the subtree, so its zxid is known. Two kinds of watcher session
// run meanwhile:
//   - persistent: one persistent-recursive watch (AddWatch) on the
//     subtree, and plain exists reads of its nodes;
//   - one-shot: an exists watch (ExistsW) armed on every node, re-armed
//     when it fires, and plain exists reads in between.
//
// A tap records every message each watcher receives, in wire order. The
// checker, per watcher session:
//   - order: the zxids of the watch events (but -1, the events a server
//     synthesises on re-attach) strictly increase;
//   - once (persistent): every acknowledged change under the subtree (a
//     create's czxid, a set's mzxid, a delete's multi zxid) is announced by
//     exactly one event with its zxid, path and type, if it falls in a
//     window the watch covered: from the zxid of the connected message of a
//     stream (for the first, of the addWatch response) to the largest event
//     zxid received on that stream. Changes between a disconnect and the
//     next connected zxid are excused: ZooKeeper does not replay them to
//     persistent watches (only one-shot watches re-registered with the last
//     zxid fire at once, with a synthesised event);
//   - once (one-shot): at most one event per arming of a node's watch, and
//     none announcing a change the arming read already showed (an event
//     zxid at or below the armed mzxid);
//   - before the data: a plain read on the session of a node whose watch
//     is armed that shows a state other than the one the watch was armed on
//     (one-shot), or a version newer than the coverage window's start
//     (persistent), must come after an event for that node was received
//     (for persistent watches, the event for exactly that mzxid).
//
// The run ends with a flush: each persistent watcher creates a node of its
// own under the subtree and waits for its event, which closes the last
// coverage window after every change acknowledged before it.
type Watches struct {
	Nodes   int
	Writers int

	next     atomic.Int64
	mu       sync.Mutex
	watchers []*watcherLog
}

const watchesRoot = "/jepsen/watches"
const watchesClock = "/jepsen/watches-clock"

// watcherLog is what one watcher session saw.
type watcherLog struct {
	Kind    string // persistent or oneshot
	Session int64
	tap     *zxidTap
	// Arms: for a persistent watch, its one registration; for one-shot,
	// every arming.
	mu    sync.Mutex
	Arms  []watchArm
	Reads []Op
}

// watchArm is one registration: the path, when it was invoked (the
// history's clock) and what its response showed.
type watchArm struct {
	Path   string
	At     int64 // the call was invoked
	Zxid   int64 // persistent: the addWatch response's zxid
	Exists bool
	Mzxid  int64
	Fired  int64 // when its event came (0: never)
	Failed bool  // the call failed: the watch may or may not be set
}

func (w *Watches) Name() string { return "watches" }

func (w *Watches) node(i int) string { return fmt.Sprintf("%s/n%d", watchesRoot, i) }

func (w *Watches) Setup(ctx context.Context, env *Env) error {
	w.watchers = nil
	return env.retry(ctx, func(conn *zk.Conn) error {
		if err := ensurePath(conn, watchesRoot); err != nil {
			return err
		}
		return ensurePath(conn, watchesClock)
	})
}

func (w *Watches) Run(ctx context.Context, env *Env) {
	var wg sync.WaitGroup
	for i, kind := range []string{"persistent", "oneshot"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.watcher(ctx, env, kind, 1000+i)
		}()
	}
	runWorkers(ctx, w.Writers, func(worker int) { w.writer(ctx, env, worker) })
	wg.Wait()
}

func (w *Watches) writer(ctx context.Context, env *Env, worker int) {
	r := env.rng(w.Name(), worker)
	for process := worker; ctx.Err() == nil; process += w.Writers {
		g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, false)
		if err != nil {
			continue
		}
		sid := g.SessionID()
		for ctx.Err() == nil {
			path := w.node(r.Intn(w.Nodes))
			op := Op{Workload: w.Name(), Process: process, Path: path, Session: sid, Invoke: env.History.Now()}
			octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
			switch r.Intn(3) {
			case 0:
				op.F, op.Value = "create", w.next.Add(1)
				var st vocab.Stat
				_, st, err = g.Create2(octx, path, []byte(strconv.FormatInt(op.Value, 10)), vocab.ModePersistent, vocab.OpenACLUnsafe)
				op.Zxid = st.Czxid
			case 1:
				op.F, op.Value = "set", w.next.Add(1)
				var st vocab.Stat
				st, err = g.Set(octx, path, []byte(strconv.FormatInt(op.Value, 10)), -1)
				op.Zxid = st.Mzxid
			default:
				op.F = "delete"
				var res []client.OpResult
				res, err = g.Multi(octx, client.DeleteOp{Path: path, Version: -1}, client.SetDataOp{Path: watchesClock, Version: -1})
				if err == nil && len(res) == 2 {
					op.Zxid = res[1].Stat.Mzxid
				}
			}
			cancel()
			op.Complete, op.Outcome, op.Err, op.Server = env.History.Now(), goOutcome(err), errString(err), g.Server()
			if op.Outcome != OK {
				op.Zxid = 0
			}
			env.History.Add(op)
			if goEnded(err) {
				break
			}
		}
		env.closeGo(g)
	}
}

// watcher runs watcher sessions of one kind until ctx ends.
func (w *Watches) watcher(ctx context.Context, env *Env, kind string, process int) {
	for ctx.Err() == nil {
		g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, false)
		if err != nil {
			continue
		}
		l := &watcherLog{Kind: kind, Session: g.SessionID(), tap: g.tap}
		w.mu.Lock()
		w.watchers = append(w.watchers, l)
		w.mu.Unlock()
		if kind == "persistent" {
			w.persistent(ctx, env, g, l, process)
		} else {
			w.oneShot(ctx, env, g, l, process)
		}
		env.closeGo(g)
	}
}

func (w *Watches) read(ctx context.Context, env *Env, g *goConn, l *watcherLog, process int, path string) error {
	op := Op{Workload: w.Name(), Process: process, F: "read", Path: path, Session: l.Session, Invoke: env.History.Now()}
	octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
	ok, st, err := g.Exists(octx, path)
	cancel()
	op.Complete, op.Err, op.Server = env.History.Now(), errString(err), g.Server()
	op.Outcome = OK
	if err != nil {
		op.Outcome = Fail
	} else if ok {
		op.Zxid, op.OutVersion, op.OutValue = st.Mzxid, st.Version, 1
	}
	env.History.Add(op)
	if err == nil {
		l.mu.Lock()
		l.Reads = append(l.Reads, op)
		l.mu.Unlock()
	}
	return err
}

func (w *Watches) persistent(ctx context.Context, env *Env, g *goConn, l *watcherLog, process int) {
	invoke := env.History.Now()
	actx, cancel := context.WithTimeout(ctx, env.OpTimeout)
	ch, err := g.AddWatch(actx, watchesRoot, true)
	cancel()
	if err != nil {
		return
	}
	l.mu.Lock()
	l.Arms = append(l.Arms, watchArm{Path: watchesRoot, At: invoke, Zxid: g.LastZxid()})
	l.mu.Unlock()
	go func() {
		for range ch { // the tap records the events; the channel only has to be drained
		}
	}()
	r := env.rng(w.Name(), process)
	for ctx.Err() == nil {
		err := w.read(ctx, env, g, l, process, w.node(r.Intn(w.Nodes)))
		if goEnded(err) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The flush: a node of our own, and its event.
	fctx, cancel := context.WithTimeout(context.Background(), 2*env.OpTimeout)
	defer cancel()
	flush := fmt.Sprintf("%s/flush-%x", watchesRoot, l.Session)
	if _, st, err := g.Create2(fctx, flush, nil, vocab.ModeEphemeral, vocab.OpenACLUnsafe); err == nil {
		for fctx.Err() == nil {
			var got bool
			for _, o := range l.tap.Obs() {
				got = got || (o.Kind == "event" && o.Zxid == st.Czxid)
			}
			if got {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (w *Watches) oneShot(ctx context.Context, env *Env, g *goConn, l *watcherLog, process int) {
	type armed struct {
		i  int // index in l.Arms
		ch <-chan client.Event
	}
	arms := map[string]*armed{}
	r := env.rng(w.Name(), process)
	for ctx.Err() == nil {
		for i := 0; i < w.Nodes; i++ {
			path := w.node(i)
			if a := arms[path]; a != nil {
				select {
				case ev, ok := <-a.ch:
					l.mu.Lock()
					l.Arms[a.i].Fired = env.History.Now()
					l.mu.Unlock()
					delete(arms, path)
					if !ok || ev.Type == client.EventNotWatching {
						return // the session ended
					}
				default:
					continue
				}
			}
			// The arming counts from its invocation: the previous arming's
			// event was received before, so every event for path from
			// here on is this arming's (the tap may receive one before
			// the call returns).
			invoke := env.History.Now()
			octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
			ok, st, ch, err := g.ExistsW(octx, path)
			cancel()
			if err != nil {
				// The server may have registered the watch all the same:
				// the attempt still ends the previous arming's window.
				l.mu.Lock()
				l.Arms = append(l.Arms, watchArm{Path: path, At: invoke, Failed: true})
				l.mu.Unlock()
				if goEnded(err) {
					return
				}
				continue
			}
			l.mu.Lock()
			l.Arms = append(l.Arms, watchArm{Path: path, At: invoke, Exists: ok, Mzxid: st.Mzxid})
			arms[path] = &armed{i: len(l.Arms) - 1, ch: ch}
			l.mu.Unlock()
		}
		if err := w.read(ctx, env, g, l, process, w.node(r.Intn(w.Nodes))); goEnded(err) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *Watches) Check(ctx context.Context, env *Env) Verdict {
	ops := env.History.Ops(w.Name())
	w.mu.Lock()
	watchers := append([]*watcherLog(nil), w.watchers...)
	w.mu.Unlock()
	var changes []Op
	for _, op := range ops {
		if op.Outcome == OK && op.F != "read" && op.Zxid != 0 {
			changes = append(changes, op)
		}
	}
	v := Verdict{Checker: w.Name(), Result: Pass}
	var vs []violation
	events, covered := 0, 0
	for _, l := range watchers {
		l.mu.Lock()
		arms, reads := append([]watchArm(nil), l.Arms...), append([]Op(nil), l.Reads...)
		l.mu.Unlock()
		obs := l.tap.Obs()
		for _, o := range obs {
			if o.Kind == "event" {
				events++
			}
		}
		vs = append(vs, checkEventOrder(l.Session, obs)...)
		if l.Kind == "persistent" {
			pv, n := checkPersistent(l.Session, watchesRoot, arms, obs, reads, changes)
			vs, covered = append(vs, pv...), covered+n
		} else {
			vs = append(vs, checkOneShot(l.Session, arms, obs, reads)...)
		}
	}
	if len(vs) > 0 {
		v.Result = Failed
		v.Details = violationDetails(vs, 20)
	}
	v.Summary = fmt.Sprintf("%d watcher sessions, %d acknowledged changes (%d in a persistent watch's covered window), %d events received, %d violations",
		len(watchers), len(changes), covered, events, len(vs))
	return v
}

// checkEventOrder: a session's event zxids (but -1) strictly increase.
func checkEventOrder(sid int64, obs []zxidObs) []violation {
	var vs []violation
	var prev *zxidObs
	for _, o := range obs {
		if o.Kind != "event" || o.Zxid == -1 || o.Type == -1 {
			continue // a session state event (None: Expired, say) announces no change
		}
		if prev != nil && o.Zxid <= prev.Zxid {
			vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: event zxid 0x%x after 0x%x: not in zxid order", sid, o.Zxid, prev.Zxid),
				Sub: []string{"  " + prev.String(), "  " + o.String()}})
		}
		p := o
		prev = &p
	}
	return vs
}

// eventType is the event a change announces.
func eventType(f string) vocab.EventType {
	switch f {
	case "create":
		return vocab.EventNodeCreated
	case "set":
		return vocab.EventNodeDataChanged
	}
	return vocab.EventNodeDeleted
}

// checkPersistent is the persistent-watch check (see Watches); it also
// returns how many changes fell in a covered window.
func checkPersistent(sid int64, root string, arms []watchArm, obs []zxidObs, reads, changes []Op) ([]violation, int) {
	if len(arms) == 0 {
		return nil, 0
	}
	// The covered windows (lo, hi] and when each began.
	type window struct{ lo, hi, from, to int64 }
	var ws []window
	cur := &window{lo: arms[0].Zxid, hi: arms[0].Zxid, from: arms[0].At, to: 1 << 62}
	for _, o := range obs {
		if o.At < arms[0].At && o.Kind != "event" {
			continue
		}
		switch o.Kind {
		case "connected":
			if o.At > arms[0].At {
				cur.to = o.At
				ws = append(ws, *cur)
				cur = &window{lo: o.Zxid, hi: o.Zxid, from: o.At, to: 1 << 62}
			}
		case "event":
			if o.At >= cur.from || o.At >= arms[0].At-1 {
				cur.hi = max(cur.hi, o.Zxid)
			}
		}
	}
	ws = append(ws, *cur)
	type key struct {
		zxid int64
		path string
	}
	got := map[key][]zxidObs{}
	for _, o := range obs {
		if o.Kind == "event" {
			got[key{o.Zxid, o.Path}] = append(got[key{o.Zxid, o.Path}], o)
		}
	}
	var vs []violation
	covered := 0
	for _, c := range changes {
		in := false
		for _, w := range ws {
			in = in || (c.Zxid > w.lo && c.Zxid <= w.hi)
		}
		if !in {
			continue
		}
		covered++
		evs := got[key{c.Zxid, c.Path}]
		switch {
		case len(evs) == 0:
			vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: %s of %s at zxid 0x%x, inside the persistent watch's covered window, was never announced", sid, c.F, c.Path, c.Zxid),
				Sub: append(describeOps([]Op{c}), eventsAround(obs, c.Zxid)...)})
		case len(evs) > 1:
			vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: %s of %s at zxid 0x%x announced %d times", sid, c.F, c.Path, c.Zxid, len(evs)),
				Sub: append(describeOps([]Op{c}), eventsAround(obs, c.Zxid)...)})
		case vocab.EventType(evs[0].Type) != eventType(c.F):
			vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: %s of %s at zxid 0x%x announced as %s", sid, c.F, c.Path, c.Zxid, vocab.EventType(evs[0].Type)),
				Sub: append(describeOps([]Op{c}), "  "+evs[0].String())})
		}
	}
	// Before the data: a read showing mzxid m above its window's start
	// comes after the event for m.
	for _, r := range reads {
		if r.OutValue != 1 {
			continue
		}
		var w *window
		for i := range ws {
			if r.Invoke >= ws[i].from && r.Complete <= ws[i].to {
				w = &ws[i]
			}
		}
		if w == nil || r.Zxid <= w.lo {
			continue
		}
		seen := false
		for _, o := range got[key{r.Zxid, r.Path}] {
			seen = seen || o.At < r.Complete
		}
		if !seen {
			vs = append(vs, violation{What: fmt.Sprintf("session 0x%x read %s at mzxid 0x%x before the event announcing it", sid, r.Path, r.Zxid),
				Sub: append(describeOps([]Op{r}), eventsAround(obs, r.Zxid)...)})
		}
	}
	return vs, covered
}

// eventsAround renders the events near zxid z (a few either side).
func eventsAround(obs []zxidObs, z int64) []string {
	var evs []zxidObs
	for _, o := range obs {
		if o.Kind == "event" || o.Kind == "connected" {
			evs = append(evs, o)
		}
	}
	i := sort.Search(len(evs), func(i int) bool { return evs[i].Kind == "event" && evs[i].Zxid >= z })
	var out []string
	for _, o := range evs[max(0, i-2):min(len(evs), i+2)] {
		out = append(out, "  "+o.String())
	}
	return out
}

// checkOneShot is the one-shot check (see Watches).
func checkOneShot(sid int64, arms []watchArm, obs []zxidObs, reads []Op) []violation {
	var vs []violation
	byPath := map[string][]watchArm{}
	for _, a := range arms {
		byPath[a.Path] = append(byPath[a.Path], a)
	}
	var paths []string
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		as := byPath[p]
		for i, a := range as {
			end := int64(1 << 62)
			if i+1 < len(as) {
				end = as[i+1].At
			}
			if a.Failed {
				continue // nothing known of it but where it began
			}
			// The wire events for p between this arming and the next.
			var evs []zxidObs
			for _, o := range obs {
				if o.Kind == "event" && o.Path == p && o.At > a.At && o.At < end {
					evs = append(evs, o)
				}
			}
			sub := []string{fmt.Sprintf("  %.3fs armed %s (exists %v, mzxid 0x%x)", secs(a.At), p, a.Exists, a.Mzxid)}
			for _, o := range evs {
				sub = append(sub, "  "+o.String())
			}
			if len(evs) > 1 {
				vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: %d events for one arming of the watch on %s", sid, len(evs), p), Sub: sub})
			}
			if len(evs) > 0 && a.Exists && evs[0].Zxid != -1 && evs[0].Zxid <= a.Mzxid {
				vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: event at zxid 0x%x on %s announces a change the arming read (mzxid 0x%x) already showed", sid, evs[0].Zxid, p, a.Mzxid), Sub: sub})
			}
			// Reads of p while armed that show another state come after
			// the event.
			for _, r := range reads {
				if r.Path != p || r.Invoke < a.At || r.Complete > end {
					continue
				}
				exists := r.OutValue == 1
				if exists == a.Exists && (!exists || r.Zxid == a.Mzxid) {
					continue
				}
				if len(evs) == 0 || evs[0].At > r.Complete {
					vs = append(vs, violation{What: fmt.Sprintf("session 0x%x read %s (exists %v, mzxid 0x%x) while its watch (armed on exists %v, mzxid 0x%x) had not fired",
						sid, p, exists, r.Zxid, a.Exists, a.Mzxid), Sub: append(sub, describeOps([]Op{r})...)})
				}
			}
		}
	}
	return vs
}
