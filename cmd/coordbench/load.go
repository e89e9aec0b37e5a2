package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coord/client"
	"coord/vocab"
)

// bench holds what every run shares: the configuration, the servers, the
// prepared znodes and the payload.
type bench struct {
	cfg     config
	servers []string      // the addresses sessions connect to (gRPC or ZooKeeper protocol)
	open    sessionOpener // opens a session over cfg.protocol
	ens     ensemble      // the servers coordbench started (-local, -zookeeper); nil with -servers
	logger  *slog.Logger
	data    []byte
	keys    []string // prepared znodes for set, get, mixed, watch and failover
	tag     uint16   // random per invocation, so created names never collide with an earlier invocation's
	runs    int      // runs so far; part of created names
	trouble bool     // some run saw errors, disconnects or leftovers: keep the servers' logs
}

const (
	benchRoot  = "/coordbench"
	createRoot = benchRoot + "/create"
	keysRoot   = benchRoot + "/keys"
)

func newBench(cfg config, servers []string, ens ensemble, logger *slog.Logger) *bench {
	b := &bench{cfg: cfg, servers: servers, ens: ens, logger: logger, tag: uint16(rand.Uint32())}
	if cfg.protocol == "zk" {
		b.open = zkOpener(servers, cfg.zkSessionTimeout, logger)
	} else {
		b.open = grpcOpener(servers, logger)
	}
	b.data = make([]byte, cfg.dataSize)
	for i := range b.data {
		b.data[i] = 'a' + byte(i%26)
	}
	return b
}

// connectAll opens n sessions, a few at a time; session i+first starts at
// server (i+first) modulo the list and moves on in list order, so sessions
// spread round-robin. Disconnected/Expired events are counted into disc.
func (b *bench) connectAll(ctx context.Context, n, first int, disc *atomic.Uint64) ([]session, error) {
	sessions := make([]session, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			sessions[i], errs[i] = b.open(ctx, i+first, disc)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(sessions)
		return nil, err
	}
	return sessions, nil
}

// closeAll closes sessions (nil ones are skipped) concurrently.
func closeAll(sessions []session) {
	var wg sync.WaitGroup
	for _, s := range sessions {
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.close()
		}()
	}
	wg.Wait()
}

// prepare creates the parents and the prepared znodes (existing ones are
// fine, so an existing cluster can be loaded again).
func (b *bench) prepare(ctx context.Context, log io.Writer) error {
	start := time.Now()
	var disc atomic.Uint64
	ss, err := b.connectAll(ctx, 1, 0, &disc)
	if err != nil {
		return err
	}
	c := ss[0]
	defer closeAll(ss)
	// A create that fails with ConnectionLoss may or may not have happened,
	// so it is tried again (NodeExists then means it had); a leader change
	// during setup must not end the benchmark.
	mk := func(path string, data []byte) error {
		opCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for {
			err := c.create(opCtx, path, data)
			switch {
			case err == nil || isNodeExists(err):
				return nil
			case isConnLoss(err) && opCtx.Err() == nil:
				fmt.Fprintf(log, "# setup: %v; trying again\n", err)
				time.Sleep(50 * time.Millisecond)
			default:
				return err
			}
		}
	}
	for _, p := range []string{benchRoot, createRoot, keysRoot} {
		if err := mk(p, nil); err != nil {
			return err
		}
	}
	for p := range b.cfg.parents {
		for _, root := range []string{createRoot, keysRoot} {
			if err := mk(parentPath(root, p), nil); err != nil {
				return err
			}
		}
	}
	b.keys = make([]string, b.cfg.keys)
	for i := range b.keys {
		b.keys[i] = fmt.Sprintf("%s/key-%016d", parentPath(keysRoot, i%b.cfg.parents), i) // 20-byte name
	}
	// Pipelined on the one session: 64 creates in flight.
	next := atomic.Int64{}
	errc := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(b.keys) {
					return
				}
				if err := mk(b.keys[i], b.data); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("preparing %d znodes: %w", len(b.keys), err)
	}
	fmt.Fprintf(log, "# prepared %d znodes of %d bytes under %d parents in %v\n", len(b.keys), len(b.data), b.cfg.parents, time.Since(start).Round(time.Millisecond))
	return nil
}

// prewarm runs unreported load: setData then getData, 16 sessions × 8 in
// flight, for half of -prewarm each.
func (b *bench) prewarm(ctx context.Context, log io.Writer) error {
	saved := b.cfg
	defer func() { b.cfg = saved }()
	b.cfg.warmup, b.cfg.duration = 0, max(saved.prewarm/2, time.Second)
	for _, wl := range []string{"set", "get"} {
		res, err := b.runOne(ctx, wl, 16, 8)
		if err != nil {
			return fmt.Errorf("prewarm: %w", err)
		}
		fmt.Fprintf(log, "# prewarm (not a result): %s 16×8 for %v: %.0f ops/s, %d errors\n", wl, b.cfg.duration, res.OpsPerSec, res.Errors)
	}
	return nil
}

func parentPath(root string, p int) string { return fmt.Sprintf("%s/p%03d", root, p) }

// runResult is one line of the report.
type runResult struct {
	Workload    string            `json:"workload"`
	Sessions    int               `json:"sessions"`
	Inflight    int               `json:"inflight"`
	Seconds     float64           `json:"seconds"`
	Ops         uint64            `json:"ops"`
	OpsPerSec   float64           `json:"ops_per_sec"`
	P50         time.Duration     `json:"p50_ns"`
	P99         time.Duration     `json:"p99_ns"`
	P999        time.Duration     `json:"p999_ns"`
	Max         time.Duration     `json:"max_ns"`
	Mean        time.Duration     `json:"mean_ns"`
	Errors      uint64            `json:"errors"`
	ErrorKinds  map[string]uint64 `json:"error_kinds,omitempty"`
	Stuck       uint64            `json:"stuck"`          // requests unanswered op-timeout after the run's end
	WorstSecond uint64            `json:"worst_1s"`       // fewest ops completed in one whole second of the run
	Disconnects uint64            `json:"disconnects"`    // Disconnected/Expired session events during the run
	PerSecond   []uint64          `json:"per_second"`     // ops completed in each second of the window
	MaxPerSec   []time.Duration   `json:"max_per_second"` // slowest request completed in each second (ns)
	Health      []serverHealth    `json:"servers,omitempty"`
	Leftover    int64             `json:"leftover_sessions,omitempty"` // sessions the leader still had after Close
}

// workerStats is one worker's record; merged after the run.
type workerStats struct {
	hist   hist
	ops    uint64
	perSec []uint64
	maxSec []time.Duration
	errs   map[string]uint64
	stuck  uint64
}

// runOne runs one workload with the given sessions and requests in flight
// per session: warmup, then the measured window, then it waits at most
// op-timeout for requests still outstanding.
func (b *bench) runOne(ctx context.Context, workload string, sessions, inflight int) (runResult, error) {
	res := runResult{Workload: workload, Sessions: sessions, Inflight: inflight, Seconds: b.cfg.duration.Seconds()}
	var baseSessions int64 = -1
	if b.ens != nil {
		baseSessions = b.ens.leaderSessions(ctx)
	}
	var disconnects atomic.Uint64
	conns, err := b.connectAll(ctx, sessions, 0, &disconnects)
	if err != nil {
		return res, err
	}
	b.runs++
	run := b.runs
	// Events before the load starts (none expected) do not count.
	disconnects.Store(0)

	start := time.Now()
	windowStart := start.Add(b.cfg.warmup)
	windowEnd := windowStart.Add(b.cfg.duration)
	runCtx, cancel := context.WithDeadline(ctx, windowEnd.Add(b.cfg.opTimeout))
	defer cancel()
	// A request still unanswered op-timeout after the window (or on an
	// interrupt) is failed by closing its session: go-zookeeper's calls
	// cannot be cancelled otherwise.
	stopClosing := context.AfterFunc(runCtx, func() { closeAll(conns) })
	defer stopClosing()
	secs := int((b.cfg.duration + time.Second - 1) / time.Second)
	stats := make([]*workerStats, sessions*inflight)
	var wg sync.WaitGroup
	for s := range sessions {
		for k := range inflight {
			w := s*inflight + k
			st := &workerStats{perSec: make([]uint64, secs), maxSec: make([]time.Duration, secs), errs: map[string]uint64{}}
			stats[w] = st
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.work(runCtx, conns[s], workload, run, w, st, windowStart, windowEnd)
			}()
		}
	}
	wg.Wait()
	disc := disconnects.Load() // closing the sessions is not a disconnect
	closeAll(conns)

	var all workerStats
	all.perSec = make([]uint64, secs)
	all.maxSec = make([]time.Duration, secs)
	all.errs = map[string]uint64{}
	for _, st := range stats {
		all.hist.merge(&st.hist)
		all.ops += st.ops
		all.stuck += st.stuck
		for i, n := range st.perSec {
			all.perSec[i] += n
			all.maxSec[i] = max(all.maxSec[i], st.maxSec[i])
		}
		for k, n := range st.errs {
			all.errs[k] += n
			res.Errors += n
		}
	}
	res.Ops = all.ops
	res.OpsPerSec = float64(all.ops) / b.cfg.duration.Seconds()
	res.P50, res.P99, res.P999 = all.hist.percentile(0.50), all.hist.percentile(0.99), all.hist.percentile(0.999)
	res.Max, res.Mean = time.Duration(all.hist.max), all.hist.mean()
	res.Stuck = all.stuck
	if len(all.errs) > 0 {
		res.ErrorKinds = all.errs
	}
	res.WorstSecond = worstWholeSecond(all.perSec, b.cfg.duration)
	res.PerSecond, res.MaxPerSec = all.perSec, all.maxSec
	res.Disconnects = disc
	if b.ens != nil {
		res.Leftover = b.waitSessionsBack(ctx, baseSessions)
		res.Health = b.ens.health(ctx)
	}
	b.trouble = b.trouble || res.Errors > 0 || res.Disconnects > 0 || res.Stuck > 0 || res.Leftover > 0
	return res, ctx.Err()
}

// worstWholeSecond is the smallest count among the whole seconds of the
// window (a trailing partial second is left out unless it is all there is).
func worstWholeSecond(perSec []uint64, d time.Duration) uint64 {
	whole := int(d / time.Second)
	if whole == 0 {
		whole = len(perSec)
	}
	if whole == 0 {
		return 0
	}
	return slices.Min(perSec[:whole])
}

// work is one request stream of a session: one call at a time, so a
// session with k workers has k requests outstanding.
func (b *bench) work(ctx context.Context, c session, workload string, run, w int, st *workerStats, windowStart, windowEnd time.Time) {
	rng := rand.New(rand.NewPCG(uint64(run), uint64(w)))
	var seq uint64
	for ctx.Err() == nil {
		if time.Now().After(windowEnd) {
			return
		}
		var err error
		t0 := time.Now()
		switch op := workload; {
		case op == "create":
			seq++
			// 20-byte names: invocation tag, run, worker, sequence.
			path := fmt.Sprintf("%s/%04x%02x%04x%010x", parentPath(createRoot, int(seq)%b.cfg.parents), b.tag, run&0xff, w&0xffff, seq)
			err = c.create(ctx, path, b.data)
		case op == "set" || (op == "mixed" && rng.Float64()*100 >= b.cfg.readPercent):
			err = c.set(ctx, b.keys[rng.IntN(len(b.keys))], b.data)
		default: // get, and mixed reads
			err = c.get(ctx, b.keys[rng.IntN(len(b.keys))])
		}
		t1 := time.Now()
		if t1.After(windowEnd) {
			if err != nil && ctx.Err() != nil {
				st.stuck++
			}
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return // interrupted
			}
			st.errs[errKind(err)]++
			time.Sleep(time.Millisecond) // no hot loop on a persistent error
			continue
		}
		if t1.Before(windowStart) {
			continue // warmup
		}
		lat := t1.Sub(t0)
		st.hist.record(lat)
		st.ops++
		if i := int(t1.Sub(windowStart) / time.Second); i < len(st.perSec) {
			st.perSec[i]++
			st.maxSec[i] = max(st.maxSec[i], lat)
		}
	}
}

// errKind names an error for counting: the ZooKeeper code, or the context's
// verdict, or the message.
func errKind(err error) string {
	var code vocab.Code
	switch {
	case errors.As(err, &code):
		return code.String()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, client.ErrClosed):
		return "closed"
	}
	if n := zkUnknownCode(err); n != 0 {
		if name, ok := zkCodeNames[n]; ok {
			return fmt.Sprintf("%s (%d) from the server", name, n)
		}
	}
	s := strings.TrimPrefix(err.Error(), "zk: ") // go-zookeeper's errors
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// waitSessionsBack waits up to 3 s for the leader's session count to fall
// back to base after a run closed its sessions, and returns how many are
// left over (0 when it could not tell).
func (b *bench) waitSessionsBack(ctx context.Context, base int64) int64 {
	if base < 0 {
		return 0
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		n := b.ens.leaderSessions(ctx)
		if n >= 0 && n <= base {
			return 0
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if n < 0 {
				return 0
			}
			return n - base
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sortedKinds lists error kinds, most frequent first.
func sortedKinds(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		if m[out[i]] != m[out[j]] {
			return m[out[i]] > m[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}
