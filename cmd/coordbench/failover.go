package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// failoverRound is one leader kill.
type failoverRound struct {
	Round     int     `json:"round"`
	Killed    string  `json:"killed"`
	NewLeader string  `json:"new_leader"`
	Before    float64 `json:"writes_per_sec_before"` // steady write rate before the kill
	// Election is kill → a surviving server reports itself leader
	// (Admin.Status polled every 10 ms).
	Election time.Duration `json:"election_ns"`
	// Recovery is kill → the first write issued after the kill is
	// acknowledged; AllWriters the same for the last writer to get one.
	Recovery   time.Duration     `json:"recovery_ns"`
	AllWriters time.Duration     `json:"all_writers_ns"`
	Failed     int               `json:"failed_writes"` // writes that failed between the kill and Recovery
	ErrorKinds map[string]uint64 `json:"error_kinds,omitempty"`
	Disconnect uint64            `json:"disconnects"`
	Err        string            `json:"error,omitempty"`
}

// writeEvent is one write that ended while a round was being recorded.
type writeEvent struct {
	writer     int
	start, end time.Time
	err        error
}

// failoverLoad is the steady write load: one Set at a time per session,
// each on its own prepared znode.
type failoverLoad struct {
	ok atomic.Uint64

	mu        sync.Mutex
	recording bool
	events    []writeEvent
}

func (f *failoverLoad) note(ev writeEvent) {
	if ev.err == nil {
		f.ok.Add(1)
	}
	f.mu.Lock()
	if f.recording && len(f.events) < 1_000_000 {
		f.events = append(f.events, ev)
	}
	f.mu.Unlock()
}

func (f *failoverLoad) record(on bool) []writeEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recording = on
	evs := f.events
	f.events = nil
	return evs
}

// writers' first successful write issued at or after since, and whether
// every writer has one.
func firstSuccesses(evs []writeEvent, since time.Time, writers int) (first map[int]time.Time, all bool) {
	first = map[int]time.Time{}
	for _, ev := range evs {
		if ev.err != nil || ev.start.Before(since) {
			continue
		}
		if t, ok := first[ev.writer]; !ok || ev.end.Before(t) {
			first[ev.writer] = ev.end
		}
	}
	return first, len(first) == writers
}

// runFailover kills the leader cfg.failoverRounds times under a write load,
// restarting the killed server between rounds.
func (b *bench) runFailover(ctx context.Context, out io.Writer, emit func(any)) ([]failoverRound, error) {
	cfg := b.cfg
	n := cfg.failoverSessions
	var disconnects atomic.Uint64
	conns, err := b.connectAll(ctx, n, 0, &disconnects)
	if err != nil {
		return nil, err
	}

	load := &failoverLoad{}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := b.keys[i%len(b.keys)]
			for loadCtx.Err() == nil {
				opCtx, cancel := context.WithTimeout(loadCtx, cfg.opTimeout)
				t0 := time.Now()
				err := c.set(opCtx, key, b.data)
				t1 := time.Now()
				cancel()
				if loadCtx.Err() != nil {
					return
				}
				load.note(writeEvent{writer: i, start: t0, end: t1, err: err})
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// Closing the sessions fails any call still waiting (go-zookeeper's
	// take no context), so the writers end.
	defer func() { stopLoad(); closeAll(conns); wg.Wait() }()

	fmt.Fprintf(out, "%-5s %-6s %-6s %9s %12s %12s %12s %7s %5s  %s\n",
		"round", "killed", "leader", "writes/s", "election(ms)", "recovery(ms)", "all-ok(ms)", "failed", "disc", "errors")
	var rounds []failoverRound
	for r := 1; r <= cfg.failoverRounds && ctx.Err() == nil; r++ {
		fr := b.failoverRound(ctx, r, load, n, &disconnects)
		rounds = append(rounds, fr)
		b.trouble = b.trouble || fr.Err != ""
		printRound(out, fr)
		emit(struct {
			Type string `json:"type"`
			failoverRound
		}{"failover", fr})
		if fr.Err != "" && fr.Recovery == 0 {
			return rounds, fmt.Errorf("failover round %d: %s", r, fr.Err)
		}
	}
	return rounds, ctx.Err()
}

func (b *bench) failoverRound(ctx context.Context, r int, load *failoverLoad, writers int, disconnects *atomic.Uint64) failoverRound {
	cfg, ens := b.cfg, b.ens
	fr := failoverRound{Round: r}
	leader, err := ens.waitLeader(ctx, 30*time.Second, 0)
	if err != nil {
		fr.Err = err.Error()
		return fr
	}
	fr.Killed = ens.name(leader)
	ok0 := load.ok.Load()
	t := time.Now()
	select {
	case <-ctx.Done():
		fr.Err = ctx.Err().Error()
		return fr
	case <-time.After(cfg.failoverSettle):
	}
	fr.Before = float64(load.ok.Load()-ok0) / time.Since(t).Seconds()

	d0 := disconnects.Load()
	load.record(true)
	kill := time.Now()
	done := ens.killAsync(leader)
	sent := time.Now() // writes that start from here cannot reach the old leader alive

	// Election, seen from the survivors.
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		deadline := kill.Add(cfg.failoverTimeout)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			for i := 1; i <= ens.size(); i++ {
				if i == leader || !ens.alive(i) {
					continue
				}
				if ens.isLeader(ctx, i) {
					fr.Election = time.Since(kill)
					fr.NewLeader = ens.name(i)
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	<-done

	// Wait for every writer to get a write through (or the timeout).
	deadline := kill.Add(cfg.failoverTimeout)
	var evs []writeEvent
	var first map[int]time.Time
	for {
		load.mu.Lock()
		evs = slices.Clone(load.events)
		load.mu.Unlock()
		var all bool
		first, all = firstSuccesses(evs, sent, writers)
		if all || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	load.record(false)
	<-elected
	fr.Disconnect = disconnects.Load() - d0

	var firstOK, lastOK time.Time
	for _, t := range first {
		if firstOK.IsZero() || t.Before(firstOK) {
			firstOK = t
		}
		if t.After(lastOK) {
			lastOK = t
		}
	}
	if firstOK.IsZero() {
		fr.Err = fmt.Sprintf("no write succeeded within %v of the kill", cfg.failoverTimeout)
	} else {
		fr.Recovery = firstOK.Sub(kill)
		if len(first) == writers {
			fr.AllWriters = lastOK.Sub(kill)
		} else {
			fr.Err = fmt.Sprintf("%d of %d writers got no write through within %v", writers-len(first), writers, cfg.failoverTimeout)
		}
	}
	for _, ev := range evs {
		if ev.err != nil && !ev.end.Before(kill) && (firstOK.IsZero() || !ev.end.After(firstOK)) {
			fr.Failed++
			if fr.ErrorKinds == nil {
				fr.ErrorKinds = map[string]uint64{}
			}
			fr.ErrorKinds[errKind(ev.err)]++
		}
	}

	// Bring the killed server back and let it catch up before the next round.
	if err := ens.restart(ctx, leader); err != nil {
		fr.Err = joinMsg(fr.Err, err.Error())
		return fr
	}
	newLeader, err := ens.waitLeader(ctx, 30*time.Second, 0)
	if err == nil {
		err = ens.waitCaughtUp(ctx, leader, newLeader, 60*time.Second)
	}
	if err != nil {
		fr.Err = joinMsg(fr.Err, "after restart: "+err.Error())
	}
	return fr
}

func joinMsg(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// median of the positive durations (the mean of the middle two for an even
// count); 0 when there are none.
func median(ds []time.Duration) time.Duration {
	var v []time.Duration
	for _, d := range ds {
		if d > 0 {
			v = append(v, d)
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
