package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// The watch workload measures how long a data watch takes to fire. W
// watcher sessions each hold a one-shot data watch (getData with watch,
// set again after each event) on each of K prepared znodes; one writer
// session per znode waits until every watcher has its watch back, issues
// one setData, and waits until every watcher has its event (or op-timeout
// has passed) before the next. For each event that reaches a watcher it
// records
//   - req→ev: the event's arrival at the watcher's client (stamped in
//     go-zookeeper's receive loop; for the gRPC client, when the watch's
//     channel delivers) minus the moment the writer issued the setData;
//   - ack→ev: the same arrival minus the moment the writer received the
//     setData's response. An event can arrive before that response (it is
//     sent to another session); it then counts as 0 here and in early.
//
// Writes and events whose setData was answered inside the measured window
// count; missed are watches that were set but had not fired op-timeout
// after the response, unarmed are watchers that had not set their watch
// again op-timeout after the previous event.

// watchResult is one row of the watch report.
type watchResult struct {
	Watchers    int               `json:"watchers"`
	Keys        int               `json:"keys"`
	Seconds     float64           `json:"seconds"`
	Writes      uint64            `json:"writes"`
	WritesPerS  float64           `json:"writes_per_sec"`
	Events      uint64            `json:"events"`
	EventsPerS  float64           `json:"events_per_sec"`
	ReqP50      time.Duration     `json:"req_to_event_p50_ns"`
	ReqP99      time.Duration     `json:"req_to_event_p99_ns"`
	ReqP999     time.Duration     `json:"req_to_event_p999_ns"`
	AckP50      time.Duration     `json:"ack_to_event_p50_ns"`
	AckP99      time.Duration     `json:"ack_to_event_p99_ns"`
	AckP999     time.Duration     `json:"ack_to_event_p999_ns"`
	AckMax      time.Duration     `json:"ack_to_event_max_ns"`
	Early       uint64            `json:"early"`
	Missed      uint64            `json:"missed"`
	Unarmed     uint64            `json:"unarmed"`
	Errors      uint64            `json:"errors"`
	ErrorKinds  map[string]uint64 `json:"error_kinds,omitempty"`
	Disconnects uint64            `json:"disconnects"`
	Health      []serverHealth    `json:"servers,omitempty"`
	Leftover    int64             `json:"leftover_sessions,omitempty"`
}

// watchKey is the shared state of one watched znode.
type watchKey struct {
	path    string
	mu      sync.Mutex
	armed   int         // watchers whose watch is set for the next write
	arrived []time.Time // events of the current write, as they came
	poke    chan struct{}
}

func (k *watchKey) notify() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (checked under k.mu) holds, the deadline passes
// or ctx ends.
func (k *watchKey) waitFor(ctx context.Context, deadline time.Time, cond func() bool) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		k.mu.Lock()
		ok := cond()
		k.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-k.poke:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// watchTally accumulates the measured writes and their events.
type watchTally struct {
	mu             sync.Mutex
	req, ack       hist
	writes, events uint64
	early, missed  uint64
	unarmed        uint64
	errs           map[string]uint64
}

// addWrite records one write answered in the window: issued at t0,
// answered at t1, expected events, and the arrivals that came.
func (t *watchTally) addWrite(t0, t1 time.Time, expected int, arrived []time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes++
	for _, a := range arrived {
		t.events++
		t.req.record(a.Sub(t0))
		d := a.Sub(t1)
		if d < 0 {
			t.early++
			d = 0
		}
		t.ack.record(d)
	}
	if len(arrived) < expected {
		t.missed += uint64(expected - len(arrived))
	}
}

func (t *watchTally) addErr(err error) {
	t.mu.Lock()
	t.errs[errKind(err)]++
	t.mu.Unlock()
}

// runWatch runs the watch workload with the given number of watcher
// sessions.
func (b *bench) runWatch(ctx context.Context, watchers int) (watchResult, error) {
	nk := min(b.cfg.watchKeys, len(b.keys))
	res := watchResult{Watchers: watchers, Keys: nk, Seconds: b.cfg.duration.Seconds()}
	var baseSessions int64 = -1
	if b.ens != nil {
		baseSessions = b.ens.leaderSessions(ctx)
	}
	var disconnects atomic.Uint64
	wsess, err := b.connectAll(ctx, watchers, 0, &disconnects)
	if err != nil {
		return res, err
	}
	writers, err := b.connectAll(ctx, nk, 0, &disconnects)
	if err != nil {
		closeAll(wsess)
		return res, err
	}
	all := append(append([]session{}, wsess...), writers...)
	disconnects.Store(0)

	keys := make([]*watchKey, nk)
	for i := range keys {
		keys[i] = &watchKey{path: b.keys[i], poke: make(chan struct{}, 1)}
	}
	tally := &watchTally{errs: map[string]uint64{}}
	start := time.Now()
	windowStart := start.Add(b.cfg.warmup)
	windowEnd := windowStart.Add(b.cfg.duration)
	runCtx, cancel := context.WithDeadline(ctx, windowEnd.Add(2*b.cfg.opTimeout))
	defer cancel()
	stopClosing := context.AfterFunc(runCtx, func() { closeAll(all) })
	defer stopClosing()
	watchCtx, stopWatchers := context.WithCancel(runCtx)
	defer stopWatchers()

	var wwg sync.WaitGroup
	for _, s := range wsess {
		for _, k := range keys {
			wwg.Add(1)
			go func() {
				defer wwg.Done()
				for watchCtx.Err() == nil {
					ch, err := s.getW(watchCtx, k.path)
					if err != nil {
						if watchCtx.Err() == nil {
							tally.addErr(err)
							time.Sleep(time.Millisecond)
						}
						continue
					}
					k.mu.Lock()
					k.armed++
					k.mu.Unlock()
					k.notify()
					select {
					case f := <-ch:
						if f.changed {
							k.mu.Lock()
							k.arrived = append(k.arrived, f.at)
							k.mu.Unlock()
							k.notify()
						}
					case <-watchCtx.Done():
						return
					}
				}
			}()
		}
	}

	var wg sync.WaitGroup
	for j, k := range keys {
		w := writers[j]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil && time.Now().Before(windowEnd) {
				k.waitFor(runCtx, time.Now().Add(b.cfg.opTimeout), func() bool { return k.armed >= watchers })
				k.mu.Lock()
				n := min(k.armed, watchers)
				k.armed = 0
				k.arrived = k.arrived[:0]
				k.mu.Unlock()
				t0 := time.Now()
				err := w.set(runCtx, k.path, b.data)
				t1 := time.Now()
				if err != nil {
					if runCtx.Err() != nil {
						return
					}
					tally.addErr(err)
					k.mu.Lock()
					k.armed += n // no change, so the watches are still set
					k.mu.Unlock()
					time.Sleep(time.Millisecond)
					continue
				}
				k.waitFor(runCtx, t1.Add(b.cfg.opTimeout), func() bool { return len(k.arrived) >= n })
				k.mu.Lock()
				arrived := append([]time.Time(nil), k.arrived...)
				k.mu.Unlock()
				if t1.Before(windowStart) || t1.After(windowEnd) {
					continue
				}
				if n < watchers {
					tally.mu.Lock()
					tally.unarmed += uint64(watchers - n)
					tally.mu.Unlock()
				}
				tally.addWrite(t0, t1, n, arrived)
			}
		}()
	}
	wg.Wait()
	stopWatchers()
	wwg.Wait()
	disc := disconnects.Load()
	closeAll(all)

	res.Writes, res.Events = tally.writes, tally.events
	res.WritesPerS = float64(tally.writes) / b.cfg.duration.Seconds()
	res.EventsPerS = float64(tally.events) / b.cfg.duration.Seconds()
	res.ReqP50, res.ReqP99, res.ReqP999 = tally.req.percentile(0.50), tally.req.percentile(0.99), tally.req.percentile(0.999)
	res.AckP50, res.AckP99, res.AckP999 = tally.ack.percentile(0.50), tally.ack.percentile(0.99), tally.ack.percentile(0.999)
	res.AckMax = time.Duration(tally.ack.max)
	res.Early, res.Missed, res.Unarmed = tally.early, tally.missed, tally.unarmed
	for k, n := range tally.errs {
		res.Errors += n
		if res.ErrorKinds == nil {
			res.ErrorKinds = map[string]uint64{}
		}
		res.ErrorKinds[k] = n
	}
	res.Disconnects = disc
	if b.ens != nil {
		res.Leftover = b.waitSessionsBack(ctx, baseSessions)
		res.Health = b.ens.health(ctx)
	}
	b.trouble = b.trouble || res.Errors > 0 || res.Disconnects > 0 || res.Missed > 0 || res.Leftover > 0
	return res, ctx.Err()
}

const watchHeader = "%-8s %5s %4s %9s %9s %10s %10s %10s %10s %10s %10s %10s %6s %6s %6s %5s %8s\n"

func printWatchHeader(w io.Writer) {
	fmt.Fprintln(w, "# watch: each of W sessions holds a data watch on each of K znodes; one writer per znode sets it once every watch is")
	fmt.Fprintln(w, "# set again and waits for all events. req→ev = event's arrival at the watcher's client − setData issued;")
	fmt.Fprintln(w, "# ack→ev = arrival − writer's receipt of the setData response (an event that comes first counts 0 and in early).")
	fmt.Fprintf(w, watchHeader, "workload", "watch", "keys", "writes/s", "events/s", "req-p50", "req-p99", "req-p999",
		"ack-p50", "ack-p99", "ack-p999", "ack-max", "early", "missed", "errors", "disc", "rss(MB)")
}

func printWatch(w io.Writer, r watchResult) {
	var rss int64
	for _, h := range r.Health {
		rss = max(rss, h.RSS)
	}
	rssCol := "-"
	if rss > 0 {
		rssCol = fmt.Sprintf("%d", rss>>20)
	}
	fmt.Fprintf(w, watchHeader, "watch", fmt.Sprint(r.Watchers), fmt.Sprint(r.Keys), fmt.Sprintf("%.0f", r.WritesPerS),
		fmt.Sprintf("%.0f", r.EventsPerS), ms(r.ReqP50), ms(r.ReqP99), ms(r.ReqP999), ms(r.AckP50), ms(r.AckP99),
		ms(r.AckP999), ms(r.AckMax), fmt.Sprint(r.Early), fmt.Sprint(r.Missed), fmt.Sprint(r.Errors),
		fmt.Sprint(r.Disconnects), rssCol)
	for _, k := range sortedKinds(r.ErrorKinds) {
		fmt.Fprintf(w, "    error: %d × %s\n", r.ErrorKinds[k], k)
	}
	if r.Unarmed > 0 {
		fmt.Fprintf(w, "    warning: %d times a watcher had not set its watch again op-timeout after the previous event\n", r.Unarmed)
	}
	if r.Leftover > 0 {
		fmt.Fprintf(w, "    warning: the leader still counts %d of the run's sessions 3 s after they were closed\n", r.Leftover)
	}
	for _, h := range r.Health {
		if h.Err != "" {
			fmt.Fprintf(w, "    warning: %s: %s\n", h.ID, h.Err)
		}
	}
}
