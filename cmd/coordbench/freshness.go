package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// -freshness measures how soon a write one client was told succeeded shows
// to clients of the other servers (issue 28). ZooKeeper promises no such
// freshness without sync, but its followers apply a commit before the
// leader answers the writer, and applications lean on that.
//
// Every server is asked for `srvr` (coord and ZooKeeper answer it on the
// client port whatever their four-letter-word whitelist says) until one
// says leader and each other follower or observer. One writer session is
// on the leader and one reader session on every other server, each
// connected with that single address so that it stays there. The writer
// sets one prepared znode to a counter, -freshness-writes times plus
// freshWarmup unreported writes first; right after each acknowledgement
// every reader (all at once) calls getData on its server, and again in a
// tight loop until the znode's version is at least the one the writer was
// told, and the next write waits for every reader. Per write and reader it
// records
//   - fresh: the first getData after the ack already showed the write;
//   - lag: from the writer's receipt of the ack to the return of the
//     getData that showed the write (so a fresh first read counts its own
//     round trip: the lag is "ack to visible" as a client sees it).
//
// A reader that has not seen a write -op-timeout after its ack fails the
// run, and so does a failed setData: both say the cluster is not serving.
// It speaks only ZooKeeper's protocol, so that the client (go-zookeeper)
// is the same for coord and Apache ZooKeeper.

// freshWarmup writes go first and are not counted: they open the sessions'
// paths through both servers and the client.
const freshWarmup = 10

// freshnessRow is one row of the report: one reader's server, every reader
// of a role (Server "all"), or every reader (Server and Role "all").
type freshnessRow struct {
	Server       string        `json:"server"`
	Role         string        `json:"role"`
	Writes       uint64        `json:"writes"` // writes read, one per write and reader
	Fresh        uint64        `json:"fresh"`  // of them, shown by the first getData
	FreshPercent float64       `json:"fresh_percent"`
	LagP50       time.Duration `json:"lag_p50_ns"`
	LagP99       time.Duration `json:"lag_p99_ns"`
	LagMax       time.Duration `json:"lag_max_ns"`
	Rereads      uint64        `json:"rereads"` // getData calls after the first until the write showed
	Errors       uint64        `json:"errors"`  // failed getData calls (tried again)
}

// freshnessResult is the whole -freshness measurement.
type freshnessResult struct {
	Writer      string            `json:"writer"` // the leader the writer's session is on
	Path        string            `json:"path"`
	Writes      int               `json:"writes"`
	SetP50      time.Duration     `json:"set_p50_ns"`
	SetP99      time.Duration     `json:"set_p99_ns"`
	Rows        []freshnessRow    `json:"rows"`
	ErrorKinds  map[string]uint64 `json:"error_kinds,omitempty"`
	Disconnects uint64            `json:"disconnects"`
	Health      []serverHealth    `json:"servers,omitempty"`
}

// freshTally is what one reader saw; only its reader's goroutine writes it
// while the run lasts.
type freshTally struct {
	server, role                   string
	writes, fresh, rereads, errors uint64
	lag                            hist
	errs                           map[string]uint64
}

// add records one write as the reader saw it: after reads getData calls,
// lag after the writer's ack.
func (t *freshTally) add(reads int, lag time.Duration) {
	t.writes++
	if reads == 1 {
		t.fresh++
	}
	t.rereads += uint64(reads - 1)
	t.lag.record(lag)
}

func (t *freshTally) addErr(err error) {
	t.errors++
	if t.errs == nil {
		t.errs = map[string]uint64{}
	}
	t.errs[errKind(err)]++
}

// freshnessRows is a row per reader, in the order given, then a row per
// role (in the order the roles first appear) and one for all readers.
func freshnessRows(tallies []*freshTally) []freshnessRow {
	row := func(server, role string, ts []*freshTally) freshnessRow {
		r := freshnessRow{Server: server, Role: role}
		var lag hist
		for _, t := range ts {
			r.Writes += t.writes
			r.Fresh += t.fresh
			r.Rereads += t.rereads
			r.Errors += t.errors
			lag.merge(&t.lag)
		}
		if r.Writes > 0 {
			r.FreshPercent = 100 * float64(r.Fresh) / float64(r.Writes)
		}
		r.LagP50, r.LagP99, r.LagMax = lag.percentile(0.50), lag.percentile(0.99), time.Duration(lag.max)
		return r
	}
	var rows []freshnessRow
	var roles []string
	byRole := map[string][]*freshTally{}
	for _, t := range tallies {
		rows = append(rows, row(t.server, t.role, []*freshTally{t}))
		if byRole[t.role] == nil {
			roles = append(roles, t.role)
		}
		byRole[t.role] = append(byRole[t.role], t)
	}
	for _, role := range roles {
		rows = append(rows, row("all", role, byRole[role]))
	}
	return append(rows, row("all", "all", tallies))
}

// serverModes asks every server for `srvr` until one leads and each other
// follows or observes, and returns the leader's index and every server's
// mode.
func serverModes(ctx context.Context, addrs []string, timeout time.Duration) (int, []string, error) {
	deadline := time.Now().Add(timeout)
	for {
		leader, ok := -1, true
		modes := make([]string, len(addrs))
		for i, a := range addrs {
			out, err := fourLetter(ctx, a, "srvr", 500*time.Millisecond)
			var s zkSrvr
			if err == nil {
				s, err = parseSrvr(out)
			}
			if err != nil {
				modes[i], ok = err.Error(), false
				continue
			}
			modes[i] = s.Mode
			switch s.Mode {
			case "leader":
				ok = ok && leader < 0
				leader = i
			case "follower", "observer":
			default:
				ok = false
			}
		}
		if ok && leader >= 0 {
			return leader, modes, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, nil, fmt.Errorf("no one leader with every other server following or observing within %v (srvr modes: %s)",
				timeout, strings.Join(modes, "; "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freshWrite is one acknowledged write for the readers to look for.
type freshWrite struct {
	version int32     // the znode's version after the write
	ack     time.Time // when the writer had the response
	count   bool      // measured (not warm-up)
}

func (b *bench) runFreshness(ctx context.Context) (freshnessResult, error) {
	res := freshnessResult{Path: b.keys[0], Writes: b.cfg.freshnessWrites}
	if len(b.servers) < 2 {
		return res, errors.New("needs at least two servers: a leader for the writer and another to read from")
	}
	leader, modes, err := serverModes(ctx, b.servers, 30*time.Second)
	if err != nil {
		return res, err
	}
	name := func(i int) string {
		if b.ens != nil {
			return b.ens.name(i + 1)
		}
		return b.servers[i]
	}
	res.Writer = name(leader)
	var disc atomic.Uint64
	open := func(i int) (*zkSession, error) {
		s, err := zkOpener([]string{b.servers[i]}, b.cfg.zkSessionTimeout, b.logger)(ctx, 0, &disc)
		if err != nil {
			return nil, fmt.Errorf("session on %s: %w", name(i), err)
		}
		return s.(*zkSession), nil
	}
	writer, err := open(leader)
	if err != nil {
		return res, err
	}
	sessions := []session{writer}
	defer func() { closeAll(sessions) }()
	var readers []*zkSession
	var tallies []*freshTally
	for i, mode := range modes {
		if i == leader {
			continue
		}
		s, err := open(i)
		if err != nil {
			return res, err
		}
		sessions = append(sessions, s)
		readers = append(readers, s)
		tallies = append(tallies, &freshTally{server: name(i), role: mode})
	}

	// One goroutine per reader, all woken by the same write.
	path := res.Path
	next := make([]chan freshWrite, len(readers))
	done := make(chan error, len(readers))
	for k, s := range readers {
		next[k] = make(chan freshWrite, 1)
		t := tallies[k]
		go func() {
			for w := range next[k] {
				done <- follow(s, t, path, w, w.ack.Add(b.cfg.opTimeout), b.cfg.opTimeout)
			}
		}()
	}
	defer func() {
		for _, ch := range next {
			close(ch)
		}
	}()

	var set hist
	for n := 1; n <= freshWarmup+b.cfg.freshnessWrites && ctx.Err() == nil; n++ {
		data := fmt.Appendf(nil, "%d ", n)
		data = append(data, b.data[:max(0, min(len(b.data), b.cfg.dataSize-len(data)))]...)
		t0 := time.Now()
		st, err := writer.c.Set(path, data, -1)
		ack := time.Now()
		if err != nil {
			return res, fmt.Errorf("setData of %s on %s: %w", path, res.Writer, err)
		}
		w := freshWrite{version: st.Version, ack: ack, count: n > freshWarmup}
		if w.count {
			set.record(ack.Sub(t0))
		}
		for _, ch := range next {
			ch <- w
		}
		var errs []error
		for range readers {
			errs = append(errs, <-done)
		}
		if err := errors.Join(errs...); err != nil {
			return res, err
		}
	}
	res.SetP50, res.SetP99 = set.percentile(0.50), set.percentile(0.99)
	res.Rows = freshnessRows(tallies)
	for _, t := range tallies {
		for k, n := range t.errs {
			if res.ErrorKinds == nil {
				res.ErrorKinds = map[string]uint64{}
			}
			res.ErrorKinds[k] += n
		}
	}
	res.Disconnects = disc.Load()
	if b.ens != nil {
		res.Health = b.ens.health(ctx)
	}
	b.trouble = b.trouble || len(res.ErrorKinds) > 0 || res.Disconnects > 0
	return res, ctx.Err()
}

// follow reads path on s until it shows w (version at least w.version),
// and records into t how many reads that took and when the last one
// returned, if w counts. It gives up at deadline.
func follow(s *zkSession, t *freshTally, path string, w freshWrite, deadline time.Time, opTimeout time.Duration) error {
	for reads := 1; ; reads++ {
		_, st, err := s.c.Get(path)
		now := time.Now()
		switch {
		case err == nil && st.Version >= w.version:
			if w.count {
				t.add(reads, now.Sub(w.ack))
			}
			return nil
		case err != nil && w.count:
			t.addErr(err)
		}
		if now.After(deadline) {
			if err != nil {
				return fmt.Errorf("%s (%s): getData of %s: %w", t.server, t.role, path, err)
			}
			return fmt.Errorf("%s (%s) still shows version %d of %s %v after the writer's ack of version %d",
				t.server, t.role, st.Version, path, opTimeout, w.version)
		}
		if err != nil {
			time.Sleep(time.Millisecond) // not a tight loop against a server that fails
		}
	}
}

const freshHeader = "%-8s %-9s %7s %9s %9s %9s %9s %8s %7s\n"

func printFreshness(w io.Writer, r freshnessResult) {
	fmt.Fprintf(w, "# freshness: a session on %s (leader) sets %s %d times (after %d unreported); right after each ack one session on\n",
		r.Writer, r.Path, r.Writes, freshWarmup)
	fmt.Fprintln(w, "# every other server calls getData until it shows the write. fresh = the first getData already did; p50/p99/max =")
	fmt.Fprintln(w, "# lag from the writer's ack to the return of the getData that showed it. writes count once per reader.")
	fmt.Fprintf(w, "# writer's setData: p50 %s ms, p99 %s ms\n", ms(r.SetP50), ms(r.SetP99))
	fmt.Fprintf(w, freshHeader, "server", "role", "writes", "fresh(%)", "p50(ms)", "p99(ms)", "max(ms)", "rereads", "errors")
	for _, row := range r.Rows {
		fmt.Fprintf(w, freshHeader, row.Server, row.Role, fmt.Sprint(row.Writes), fmt.Sprintf("%.1f", row.FreshPercent),
			ms(row.LagP50), ms(row.LagP99), ms(row.LagMax), fmt.Sprint(row.Rereads), fmt.Sprint(row.Errors))
	}
	for _, k := range sortedKinds(r.ErrorKinds) {
		fmt.Fprintf(w, "    error: %d × %s\n", r.ErrorKinds[k], k)
	}
	if r.Disconnects > 0 {
		fmt.Fprintf(w, "    warning: sessions lost their server %d times\n", r.Disconnects)
	}
	for _, h := range r.Health {
		if h.Err != "" {
			fmt.Fprintf(w, "    warning: %s: %s\n", h.ID, h.Err)
		}
	}
}
