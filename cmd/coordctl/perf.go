package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"coord/client"
	"coord/vocab"
)

// perfLoad is one of check perf's loads: how hard it pushes and what the
// cluster must reach to pass (as etcdctl's check perf loads).
type perfLoad struct {
	sessions, inflight int
	minWrites          float64       // setData/s
	minReads           float64       // getData/s
	maxP99             time.Duration // of writes and of reads
}

var perfLoads = map[string]perfLoad{
	"s":  {sessions: 8, inflight: 1, minWrites: 500, minReads: 5000, maxP99: 50 * time.Millisecond},
	"m":  {sessions: 32, inflight: 4, minWrites: 3000, minReads: 20000, maxP99: 100 * time.Millisecond},
	"l":  {sessions: 64, inflight: 8, minWrites: 8000, minReads: 40000, maxP99: 200 * time.Millisecond},
	"xl": {sessions: 128, inflight: 8, minWrites: 15000, minReads: 60000, maxP99: 300 * time.Millisecond},
}

func checkCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the cluster's health and speed",
	}
	load, duration := "s", 10*time.Second
	perf := &cobra.Command{
		Use:   "perf",
		Short: "A short write and read load with a pass/fail verdict on throughput and p99",
		Long: `Run setData and then getData on 100-byte znodes under a temporary directory,
from --load's sessions (spread over --servers) for --duration each, and check the
throughput and the 99th-percentile latency against the load's bar:

  load  sessions x in flight  writes/s  reads/s  p99
  s      8 x 1                  500      5,000   50ms
  m     32 x 4                3,000     20,000  100ms
  l     64 x 8                8,000     40,000  200ms
  xl   128 x 8               15,000     60,000  300ms

Exits 10 if a bar is missed. The directory is removed afterwards.`,
		Example: "  coordctl check perf\n  coordctl check perf --load m --duration 30s -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, ok := perfLoads[load]
			if !ok {
				return usageError{fmt.Errorf("--load %q: want s, m, l or xl", load)}
			}
			return g.checkPerf(cmd.Context(), load, l, duration)
		},
	}
	perf.Flags().StringVar(&load, "load", load, "s, m, l or xl")
	perf.Flags().DurationVar(&duration, "duration", duration, "how long each phase (writes, reads) runs")
	cmd.AddCommand(perf)
	return cmd
}

type perfPhase struct {
	Op      string  `json:"op"`
	Ops     int     `json:"ops"`
	Errors  int     `json:"errors"`
	PerSec  float64 `json:"per_sec"`
	P50     string  `json:"p50"`
	P99     string  `json:"p99"`
	Min     float64 `json:"min_per_sec"`
	MaxP99  string  `json:"max_p99"`
	Pass    bool    `json:"pass"`
	p99     time.Duration
	elapsed time.Duration
}

func (g *globals) checkPerf(ctx context.Context, name string, l perfLoad, d time.Duration) error {
	conns := make([]*client.Conn, l.sessions)
	defer func() {
		for _, c := range conns {
			if c != nil {
				cctx, cancel := context.WithTimeout(context.Background(), g.dialTimeout)
				c.Close(cctx)
				cancel()
			}
		}
	}()
	for i := range conns {
		c, err := g.session(ctx)
		if err != nil {
			return err
		}
		conns[i] = c
	}
	dir := fmt.Sprintf("/coordctl-check-perf-%08x", rand.Uint32())
	setup, cancel := context.WithTimeout(ctx, g.commandTimeout)
	defer cancel()
	if _, err := conns[0].Create(setup, dir, nil, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
		return fmt.Errorf("check perf: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), g.commandTimeout)
		defer cancel()
		kids, _, _ := conns[0].Children(cctx, dir)
		for _, k := range kids {
			conns[0].Delete(cctx, dir+"/"+k, -1)
		}
		conns[0].Delete(cctx, dir, -1)
	}()
	const keys = 100
	data := make([]byte, 100)
	for i := 0; i < keys; i++ {
		if _, err := conns[0].Create(setup, fmt.Sprintf("%s/k%03d", dir, i), data, vocab.ModePersistent, vocab.OpenACLUnsafe); err != nil {
			return fmt.Errorf("check perf: %w", err)
		}
	}
	write := func(c *client.Conn, rctx context.Context, i int) error {
		_, err := c.Set(rctx, fmt.Sprintf("%s/k%03d", dir, i%keys), data, -1)
		return err
	}
	read := func(c *client.Conn, rctx context.Context, i int) error {
		_, _, err := c.Get(rctx, fmt.Sprintf("%s/k%03d", dir, i%keys))
		return err
	}
	phases := []*perfPhase{
		g.perfPhase(ctx, "setData", conns, l, d, write),
		g.perfPhase(ctx, "getData", conns, l, d, read),
	}
	phases[0].Min, phases[1].Min = l.minWrites, l.minReads
	pass := true
	for _, p := range phases {
		p.MaxP99 = l.maxP99.String()
		p.Pass = p.Errors == 0 && p.PerSec >= p.Min && p.p99 <= l.maxP99
		pass = pass && p.Pass
	}
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	g.show(view{json: map[string]any{"load": name, "sessions": l.sessions, "inflight": l.inflight, "phases": phases, "pass": pass},
		text: func(w io.Writer) {
			for _, p := range phases {
				mark := "ok"
				if !p.Pass {
					mark = "FAIL"
				}
				fmt.Fprintf(w, "%-8s %8.0f/s (want >= %.0f)  p50 %s  p99 %s (want <= %s)  errors %d  %s\n",
					p.Op, p.PerSec, p.Min, p.P50, p.P99, p.MaxP99, p.Errors, mark)
			}
			fmt.Fprintf(w, "load %s (%d sessions x %d in flight): %s\n", name, l.sessions, l.inflight, verdict)
		}})
	if !pass {
		return checkFailed{fmt.Sprintf("check perf --load %s: below the bar", name)}
	}
	return nil
}

// perfPhase runs op from every session with inflight requests each for d.
func (g *globals) perfPhase(ctx context.Context, name string, conns []*client.Conn, l perfLoad, d time.Duration,
	op func(*client.Conn, context.Context, int) error) *perfPhase {
	var (
		mu    sync.Mutex
		lat   []time.Duration
		errs  int
		wg    sync.WaitGroup
		start = time.Now()
		stop  = start.Add(d)
	)
	p := g.progress("check perf "+name, "seconds", int64(d/time.Second))
	tick := time.NewTicker(time.Second)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-tick.C:
				p.add(1)
			case <-done:
				return
			}
		}
	}()
	for si, c := range conns {
		for j := 0; j < l.inflight; j++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				var mine []time.Duration
				bad := 0
				for n := i; time.Now().Before(stop) && ctx.Err() == nil; n += 7919 {
					rctx, cancel := context.WithTimeout(ctx, g.commandTimeout)
					t0 := time.Now()
					err := op(c, rctx, n)
					cancel()
					if err != nil {
						bad++
						continue
					}
					mine = append(mine, time.Since(t0))
				}
				mu.Lock()
				lat = append(lat, mine...)
				errs += bad
				mu.Unlock()
			}(si*l.inflight + j)
		}
	}
	wg.Wait()
	tick.Stop()
	close(done)
	p.done()
	elapsed := time.Since(start)
	slices.Sort(lat)
	pct := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	return &perfPhase{Op: name, Ops: len(lat), Errors: errs, PerSec: float64(len(lat)) / elapsed.Seconds(),
		P50: pct(0.50).Round(time.Microsecond).String(), P99: pct(0.99).Round(time.Microsecond).String(),
		p99: pct(0.99), elapsed: elapsed}
}
