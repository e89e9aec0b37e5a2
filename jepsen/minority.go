package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"coord/client"
	"coord/vocab"
)

// Minority checks that a client of a server cut off from the quorum is
// told Disconnected before the majority expires its session (DESIGN.md,
// server/leaderloss.go). It needs the partition nemeses.
//
// One pinned client per server, on coord's Go client: its server list
// starts with its home server (no shuffle), so it is attached there until
// the server drops it, and then moves on to the others. Each session
// creates an ephemeral named after itself and reads it every 20 ms; its
// session timeout is short (MinoritySessionTimeout), so a partition held
// for a few seconds outlives it. An observer session (any server) holds a
// persistent-recursive watch on the ephemerals' parent: the time its tap
// receives a NodeDeleted for a session's ephemeral bounds from above when
// the majority expired that session.
//
// The checker: for each partition fault (from the history's fault list,
// "partition A | B"), the smaller side is the minority; a pinned session
// whose home server is in it and that was Connected to it when the fault
// began is exercised. If the observer saw its ephemeral deleted at t_exp,
// the client must have seen Disconnected (or Expired) after the fault began
// and before t_exp, and no read it invoked after t_exp may have succeeded
// on the session on a server that had applied the expiry (its response
// zxid at or past the deletion's; a lagging server may still serve it, as
// ZooKeeper's local reads do). A session that was not expired passes either way.
//
// When no partition isolated a server a pinned client was connected to
// (no root, no partition nemesis, or an unlucky schedule) the verdict is a
// pass whose summary says "not exercised": the run did not test the
// property, and a missing nemesis must not fail every run without root.
type Minority struct {
	SessionTimeout time.Duration

	mu      sync.Mutex
	clients []*minorityClient
	taps    []*zxidTap
}

const minorityRoot = "/jepsen/minority"

// MinoritySessionTimeout is the pinned clients' session timeout.
const MinoritySessionTimeout = 1500 * time.Millisecond

// minorityClient is one pinned session.
type minorityClient struct {
	Process int
	Home    string // server id (s1, ...)
	Session int64
	Path    string
	g       *goConn
	Events  []sessionEvent // filled in at the check
}

func (w *Minority) Name() string { return "minority" }

func (w *Minority) Setup(ctx context.Context, env *Env) error {
	w.clients, w.taps = nil, nil
	return env.retry(ctx, func(conn *zk.Conn) error { return ensurePath(conn, minorityRoot) })
}

func (w *Minority) Run(ctx context.Context, env *Env) {
	if w.SessionTimeout == 0 {
		w.SessionTimeout = MinoritySessionTimeout
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.observe(ctx, env)
	}()
	runWorkers(ctx, len(env.GRPCAddrs), func(i int) { w.pinned(ctx, env, i) })
	wg.Wait()
}

func (w *Minority) observe(ctx context.Context, env *Env) {
	for ctx.Err() == nil {
		g, err := env.dialGo(ctx, env.GRPCAddrs, true, env.SessionTimeout, false)
		if err != nil {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, env.OpTimeout)
		ch, err := g.AddWatch(actx, minorityRoot, true)
		cancel()
		if err == nil {
			w.mu.Lock()
			w.taps = append(w.taps, g.tap)
			w.mu.Unlock()
		watch:
			for {
				select {
				case ev, ok := <-ch:
					if !ok || ev.Type == client.EventNotWatching {
						break watch
					}
				case <-ctx.Done():
					break watch
				}
			}
		}
		env.closeGo(g)
	}
}

func (w *Minority) pinned(ctx context.Context, env *Env, i int) {
	servers := append([]string{env.GRPCAddrs[i]}, env.GRPCAddrs[:i]...)
	servers = append(servers, env.GRPCAddrs[i+1:]...)
	home := fmt.Sprintf("s%d", i+1)
	for process := 100 + i; ctx.Err() == nil; process += len(env.GRPCAddrs) {
		g, err := env.dialGo(ctx, servers, false, w.SessionTimeout, false)
		if err != nil {
			continue
		}
		c := &minorityClient{Process: process, Home: home, Session: g.SessionID(), g: g,
			Path: fmt.Sprintf("%s/%s-%x", minorityRoot, home, g.SessionID())}
		w.mu.Lock()
		w.clients = append(w.clients, c)
		w.mu.Unlock()
		octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
		_, err = g.Create(octx, c.Path, nil, vocab.ModeEphemeral, vocab.OpenACLUnsafe)
		cancel()
		for err == nil && ctx.Err() == nil {
			op := Op{Workload: w.Name(), Process: process, F: "read", Path: c.Path, Session: c.Session, Invoke: env.History.Now()}
			octx, cancel := context.WithTimeout(ctx, env.OpTimeout)
			var ok bool
			ok, _, err = g.Exists(octx, c.Path)
			cancel()
			op.Complete, op.Server, op.Err, op.Outcome = env.History.Now(), g.Server(), errString(err), OK
			if err != nil {
				op.Outcome = Fail
			} else if ok {
				op.OutValue = 1
			}
			env.History.Add(op)
			if goEnded(err) {
				break
			}
			err = nil
			time.Sleep(20 * time.Millisecond)
		}
		env.closeGo(g)
	}
}

func (w *Minority) Check(ctx context.Context, env *Env) Verdict {
	w.mu.Lock()
	clients := append([]*minorityClient(nil), w.clients...)
	taps := append([]*zxidTap(nil), w.taps...)
	w.mu.Unlock()
	for _, c := range clients {
		c.Events = c.g.Events()
	}
	expired := map[string]expiry{} // ephemeral path -> first NodeDeleted seen
	for _, t := range taps {
		for _, o := range t.Obs() {
			if o.Kind == "event" && vocab.EventType(o.Type) == vocab.EventNodeDeleted {
				if e, ok := expired[o.Path]; !ok || o.At < e.At {
					expired[o.Path] = expiry{At: o.At, Zxid: o.Zxid}
				}
			}
		}
	}
	// Each successful read's response zxid: how far the server that
	// answered it had applied.
	ops := env.History.Ops(w.Name())
	for _, c := range clients {
		var resps []zxidObs
		for _, o := range c.g.tap.Obs() {
			if o.Kind == "response" {
				resps = append(resps, o)
			}
		}
		for i := range ops {
			op := &ops[i]
			if op.Session != c.Session || op.Outcome != OK {
				continue
			}
			for _, o := range resps {
				if o.At >= op.Invoke && o.At <= op.Complete {
					op.Zxid = o.Zxid
				}
			}
		}
	}
	addrs := map[string]string{}
	for i, a := range env.GRPCAddrs {
		addrs[fmt.Sprintf("s%d", i+1)] = a
	}
	vs, exercised, expiries := checkMinority(env.History.Faults(), clients, addrs, expired, ops)
	v := Verdict{Checker: w.Name(), Result: Pass}
	if len(vs) > 0 {
		v.Result = Failed
		v.Details = violationDetails(vs, 20)
	}
	if exercised == 0 {
		v.Summary = fmt.Sprintf("not exercised: no partition isolated a server a pinned client was connected to (%d sessions)", len(clients))
		return v
	}
	v.Summary = fmt.Sprintf("%d sessions, %d cut off on a minority server (%d of them expired by the majority), %d violations",
		len(clients), exercised, expiries, len(vs))
	return v
}

// partitionSides parses a partition fault's description
// ("partition s1 | s2,s3") into the minority (the smaller side; the first
// one on a tie) and the rest.
func partitionSides(f Fault) (minority []string, ok bool) {
	if !strings.HasPrefix(f.Nemesis, "partition-") || f.Err != "" {
		return nil, false
	}
	desc := strings.TrimPrefix(f.Desc, "partition ")
	parts := strings.Split(desc, "|")
	if len(parts) != 2 {
		return nil, false
	}
	var sides [2][]string
	for i, p := range parts {
		for _, s := range strings.Split(strings.TrimSpace(p), ",") {
			if s != "" {
				sides[i] = append(sides[i], s)
			}
		}
	}
	if len(sides[1]) < len(sides[0]) {
		return sides[1], true
	}
	return sides[0], true
}

// expiry is when the observer saw a session's ephemeral deleted, and the
// zxid of that deletion (the session's close).
type expiry struct{ At, Zxid int64 }

// checkMinority is the checker (see Minority). addrs maps server ids to
// the addresses session events name; expired maps ephemeral paths to when
// their deletion was seen. It returns the violations, how many sessions
// were exercised and how many of those the majority expired.
func checkMinority(faults []Fault, clients []*minorityClient, addrs map[string]string, expired map[string]expiry, ops []Op) ([]violation, int, int) {
	sort.Slice(faults, func(i, j int) bool { return faults[i].Start < faults[j].Start })
	var vs []violation
	exercised, expiries := 0, 0
	for _, f := range faults {
		minority, ok := partitionSides(f)
		if !ok {
			continue
		}
		cut := map[string]bool{}
		for _, s := range minority {
			cut[addrs[s]] = true
		}
		for _, c := range clients {
			// Attached to a cut-off server when the fault began?
			var at *sessionEvent
			for i := range c.Events {
				if c.Events[i].At <= f.Start {
					at = &c.Events[i]
				}
			}
			if at == nil || at.State != client.StateConnected || !cut[at.Server] {
				continue
			}
			exercised++
			var disc *sessionEvent
			for i := range c.Events {
				e := c.Events[i]
				if e.At > f.Start && (e.State == client.StateDisconnected || e.State == client.StateExpired) {
					disc = &c.Events[i]
					break
				}
			}
			exp, gone := expired[c.Path]
			tExp := exp.At
			if !gone || tExp < f.Start {
				continue
			}
			expiries++
			sub := []string{fmt.Sprintf("  %.3fs..%.3fs %s: %s", secs(f.Start), secs(f.End), f.Nemesis, f.Desc),
				fmt.Sprintf("  %.3fs session 0x%x (p%d, home %s) Connected to %s", secs(at.At), c.Session, c.Process, c.Home, at.Server)}
			if disc != nil {
				sub = append(sub, fmt.Sprintf("  %.3fs session 0x%x %s (from %s)", secs(disc.At), c.Session, disc.State, disc.Server))
			}
			sub = append(sub, fmt.Sprintf("  %.3fs the majority deleted its ephemeral %s (session expired)", secs(tExp), c.Path))
			if disc == nil || disc.At >= tExp {
				vs = append(vs, violation{What: fmt.Sprintf("session 0x%x on minority server %s was expired by the majority (seen at %.3fs) before its client was told Disconnected",
					c.Session, c.Home, secs(tExp)), Sub: sub})
			}
			for _, op := range ops {
				// A server that has not yet applied the close may still
				// serve the session (ZooKeeper's reads are local too); one
				// that had (its response zxid at or past the close's) may
				// not. A read without a known zxid is judged by time.
				served := op.Zxid == 0 || exp.Zxid == 0 || op.Zxid >= exp.Zxid
				if op.Session == c.Session && op.Outcome == OK && op.Invoke > tExp && served {
					vs = append(vs, violation{What: fmt.Sprintf("session 0x%x: a read invoked at %.3fs on %s (zxid 0x%x) succeeded after the majority expired the session (%.3fs, zxid 0x%x)",
						c.Session, secs(op.Invoke), op.Server, op.Zxid, secs(tExp), exp.Zxid), Sub: append(sub, describeOp(op))})
					break
				}
			}
		}
	}
	return vs, exercised, expiries
}
