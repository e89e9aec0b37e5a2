package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// bigRoot holds the -big tree: bigParents parents of N/bigParents znodes
// each, named with 20 bytes ("z" and 19 digits).
const (
	bigRoot    = benchRoot + "/big"
	bigParents = 100
)

func bigPath(i int) string { return fmt.Sprintf("%s/p%03d/z%019d", bigRoot, i%bigParents, i) }

// restartRound is one kill -9 and restart of a follower holding the big
// tree.
type restartRound struct {
	Round  int    `json:"round"`
	Killed string `json:"killed"`
	// FirstRead is SIGKILL → the first getData answered by the restarted
	// server (a session that names only it), of a znode created before
	// the kill.
	FirstRead time.Duration `json:"first_read_ns"`
	// Wiped: the server's state was deleted before the start (-big-wipe);
	// CaughtUp is then SIGKILL → it has applied what the leader had
	// committed when it answered that first read.
	Wiped    bool          `json:"wiped,omitempty"`
	CaughtUp time.Duration `json:"caught_up_ns,omitempty"`
	// PastSnapshot is how many log entries the killed server had applied
	// past its newest whole snapshot (coord): the replay after its
	// restore, which at 10M znodes can take as long as the restore.
	PastSnapshot *uint64 `json:"past_snapshot_entries,omitempty"`
	Err          string  `json:"error,omitempty"`
}

// bigResult is the -big measurement.
type bigResult struct {
	Znodes   int            `json:"znodes"`
	Load     time.Duration  `json:"load_ns"`
	Failed   uint64         `json:"failed_creates"`
	Servers  []serverHealth `json:"servers"`
	Restarts []restartRound `json:"restarts"`
	Wiped    *restartRound  `json:"wiped,omitempty"` // -big-wipe
	// FreshPage is what this machine took per 4 KiB page of memory touched
	// for the first time, just before the restarts (freshPageCost): a
	// restart's restore touches its whole tree so, and on a VM that cost
	// varies from day to day by an order of magnitude.
	FreshPage time.Duration `json:"fresh_page_ns,omitempty"`
}

// runBig loads n znodes of cfg.dataSize bytes with 64 sessions × 8
// creates in flight, reports each server's memory once every follower
// has them, then kills a follower with SIGKILL rounds times, starts it
// again at once, and times the kill to its first successful getData.
func (b *bench) runBig(ctx context.Context, out io.Writer, n, rounds int) (bigResult, error) {
	res := bigResult{Znodes: n}
	var disc atomic.Uint64
	conns, err := b.connectAll(ctx, 64, 0, &disc)
	if err != nil {
		return res, err
	}
	defer closeAll(conns)
	for _, p := range append([]string{bigRoot}, func() []string {
		var ps []string
		for i := range bigParents {
			ps = append(ps, fmt.Sprintf("%s/p%03d", bigRoot, i))
		}
		return ps
	}()...) {
		if err := conns[0].create(ctx, p, nil); err != nil && !isNodeExists(err) {
			return res, fmt.Errorf("creating %s: %w", p, err)
		}
	}

	var next, done, failed atomic.Int64
	start := time.Now()
	stop := every(5*time.Second, func() {
		d := done.Load()
		fmt.Fprintf(out, "# big: %d of %d znodes after %v (%.0f/s)\n", d, n, time.Since(start).Round(time.Second), float64(d)/time.Since(start).Seconds())
	})
	var wg sync.WaitGroup
	for _, c := range conns {
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= n {
						return
					}
					for try := 0; ; try++ {
						opCtx, cancel := context.WithTimeout(ctx, b.cfg.opTimeout)
						err := c.create(opCtx, bigPath(i), b.data)
						cancel()
						if err == nil || isNodeExists(err) {
							break
						}
						if try == 20 || ctx.Err() != nil {
							failed.Add(1)
							break
						}
						time.Sleep(50 * time.Millisecond)
					}
					done.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	stop()
	res.Load, res.Failed = time.Since(start), uint64(failed.Load())
	fmt.Fprintf(out, "# big: %d znodes (%d B data, 20 B names) created in %v (%.0f/s), %d failed\n",
		n, b.cfg.dataSize, res.Load.Round(time.Millisecond), float64(n)/res.Load.Seconds(), res.Failed)
	if err := ctx.Err(); err != nil {
		return res, err
	}

	ens := b.ens
	leader, err := ens.waitLeader(ctx, 60*time.Second, 0)
	if err != nil {
		return res, err
	}
	for i := 1; i <= ens.size(); i++ {
		if i != leader {
			if err := ens.waitCaughtUp(ctx, i, leader, 5*time.Minute); err != nil {
				return res, fmt.Errorf("%s catching up after the load: %w", ens.name(i), err)
			}
		}
	}
	res.Servers = ens.health(ctx)
	for _, h := range res.Servers {
		fmt.Fprintf(out, "# big: %s %s: %d znodes, RSS %d MB (%.0f B per znode)", h.ID, h.Role, h.Znodes, h.RSS>>20, float64(h.RSS)/float64(max(h.Znodes, 1)))
		if h.Heap > 0 {
			fmt.Fprintf(out, ", live heap after GC %d MB (%.0f B per znode)", h.Heap>>20, float64(h.Heap)/float64(max(h.Znodes, 1)))
		}
		if h.LogBytes > 0 {
			fmt.Fprintf(out, ", raft log %d MB, %.0f snapshots (last %.0f MB in %.2f s)", h.LogBytes>>20, h.Snapshots, h.SnapBytes/(1<<20), h.SnapSecs)
		}
		fmt.Fprintln(out)
	}

	if d, err := freshPageCost(256 << 20); err == nil {
		res.FreshPage = d
		fmt.Fprintf(out, "# big: this machine takes %.2f us per 4 KiB page of memory touched for the first time (256 MiB probed); a restore touches its tree's live heap so\n", float64(d)/float64(time.Microsecond))
	}
	last := bigPath(n - 1)
	fmt.Fprintf(out, "%-5s %-6s %14s %13s  %s\n", "round", "killed", "first-read(ms)", "past-snapshot", "error")
	for r := 1; r <= rounds && ctx.Err() == nil; r++ {
		rr := b.restartRound(ctx, r, last, false)
		res.Restarts = append(res.Restarts, rr)
		past := "-"
		if rr.PastSnapshot != nil {
			past = strconv.FormatUint(*rr.PastSnapshot, 10)
		}
		fmt.Fprintf(out, "%-5d %-6s %14.1f %13s  %s\n", rr.Round, rr.Killed, float64(rr.FirstRead)/float64(time.Millisecond), past, rr.Err)
		if rr.Err != "" {
			b.trouble = true
		}
	}
	var reads []time.Duration
	for _, rr := range res.Restarts {
		reads = append(reads, rr.FirstRead)
	}
	fmt.Fprintf(out, "%-5s %-6s %14.1f\n", "median", "", float64(median(reads))/float64(time.Millisecond))
	if b.cfg.bigWipe && ctx.Err() == nil {
		rr := b.restartRound(ctx, 1, last, true)
		res.Wiped = &rr
		fmt.Fprintf(out, "# big: %s killed, its state deleted and started again: first getData after %v, caught up after %v %s\n",
			rr.Killed, rr.FirstRead.Round(time.Millisecond), rr.CaughtUp.Round(time.Millisecond), rr.Err)
		if rr.Err != "" {
			b.trouble = true
		}
	}
	return res, ctx.Err()
}

// restartRound kills a follower (the only server on a one-server
// cluster), with wipe deletes its state (ensemble.wipe), starts it again
// at once and times the kill to the first getData of path it answers; then
// waits for it to catch up.
func (b *bench) restartRound(ctx context.Context, r int, path string, wipe bool) restartRound {
	ens := b.ens
	rr := restartRound{Round: r}
	leader, err := ens.waitLeader(ctx, 60*time.Second, 0)
	if err != nil {
		rr.Err = err.Error()
		return rr
	}
	victim := leader%ens.size() + 1
	rr.Killed = ens.name(victim)
	if n, ok := ens.pastSnapshot(ctx, victim); ok {
		rr.PastSnapshot = &n
	}
	kill := time.Now()
	<-ens.killAsync(victim)
	if wipe {
		rr.Wiped = true
		if err := ens.wipe(victim); err != nil {
			rr.Err = err.Error()
			return rr
		}
	}
	if err := ens.start(victim); err != nil {
		rr.Err = err.Error()
		return rr
	}
	open := zkOpener([]string{b.servers[victim-1]}, b.cfg.zkSessionTimeout, b.logger)
	deadline := kill.Add(2 * time.Minute)
	var disc atomic.Uint64
	var last error
	for rr.FirstRead == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		s, err := open(ctx, 0, &disc)
		if err != nil {
			last = err
			continue
		}
		for time.Now().Before(deadline) && ctx.Err() == nil {
			opCtx, cancel := context.WithTimeout(ctx, b.cfg.opTimeout)
			err := s.get(opCtx, path)
			cancel()
			if err == nil {
				rr.FirstRead = time.Since(kill)
				break
			}
			last = err
			if isConnLoss(err) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		s.close()
	}
	if rr.FirstRead == 0 {
		rr.Err = fmt.Sprintf("no getData answered within 2m of the kill: %v", errors.Join(last, ctx.Err()))
		return rr
	}
	if leader, err = ens.waitLeader(ctx, 60*time.Second, 0); err == nil {
		err = ens.waitCaughtUp(ctx, victim, leader, 5*time.Minute)
	}
	if err != nil {
		rr.Err = "after the restart: " + err.Error()
	} else if wipe {
		rr.CaughtUp = time.Since(kill)
	}
	return rr
}
