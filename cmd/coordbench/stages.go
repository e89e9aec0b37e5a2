package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// -stages: the write path's stage breakdown (issue 21). coord servers time
// each stage of a write where it happens, in the histograms
// coord_write_stage_seconds{stage} of their /metrics (server/replica's
// Stage: session, forward, propose_queue, raft, apply, local_apply, reply,
// total). coordbench scrapes every server's /metrics before and after each
// run and prints, per server and stage, the observations of the run (its
// warmup included) with their mean (exact: sum over count) and p50 and p99
// interpolated within the histogram's buckets (steps of 1.5×).

// stageHist is one stage histogram of one server: cumulative bucket
// counts by upper bound, the count and the sum.
type stageHist struct {
	le    []float64
	cum   []float64
	count float64
	sum   float64
}

type stageScrape map[string]*stageHist // by stage

// scrapeStages reads coord_write_stage_seconds from http://addr/metrics.
func scrapeStages(addr string) (stageScrape, error) {
	cl := &http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return parseStages(resp.Body)
}

func parseStages(r io.Reader) (stageScrape, error) {
	out := stageScrape{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok || !strings.HasPrefix(name, "coord_write_stage_seconds") {
			continue
		}
		labels, val, _ := strings.Cut(rest, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
		stage, le := "", ""
		for _, kv := range strings.Split(labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			v = strings.Trim(v, `"`)
			switch k {
			case "stage":
				stage = v
			case "le":
				le = v
			}
		}
		h := out[stage]
		if h == nil {
			h = &stageHist{}
			out[stage] = h
		}
		switch name {
		case "coord_write_stage_seconds_bucket":
			b, err := strconv.ParseFloat(le, 64) // "+Inf" parses
			if err != nil {
				return nil, err
			}
			h.le, h.cum = append(h.le, b), append(h.cum, v)
		case "coord_write_stage_seconds_count":
			h.count = v
		case "coord_write_stage_seconds_sum":
			h.sum = v
		}
	}
	return out, sc.Err()
}

// minus is h's observations since before.
func (h *stageHist) minus(before *stageHist) *stageHist {
	if before == nil {
		return h
	}
	d := &stageHist{le: h.le, cum: make([]float64, len(h.cum)), count: h.count - before.count, sum: h.sum - before.sum}
	for i := range h.cum {
		d.cum[i] = h.cum[i]
		if i < len(before.cum) {
			d.cum[i] -= before.cum[i]
		}
	}
	return d
}

// quantile interpolates linearly within the bucket holding rank q.
func (h *stageHist) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lo, prev := 0.0, 0.0
	for i, c := range h.cum {
		if c >= rank {
			hi := h.le[i]
			if math.IsInf(hi, 1) {
				return lo
			}
			if c == prev {
				return hi
			}
			return lo + (hi-lo)*(rank-prev)/(c-prev)
		}
		lo, prev = h.le[i], c
	}
	return lo
}

var stageOrder = []string{"session", "forward", "propose_queue", "append", "raft", "durable_wait", "apply", "local_apply", "reply", "total"}

// printStages prints the breakdown of one run from scrapes before and
// after it, per server.
func printStages(w io.Writer, names []string, before, after []stageScrape) {
	fmt.Fprintf(w, "  %-4s %-14s %9s %10s %10s %10s\n", "srv", "stage", "count", "mean", "p50", "p99")
	for i := range after {
		if after[i] == nil {
			continue
		}
		keys := append([]string(nil), stageOrder...)
		for st := range after[i] {
			if !contains(keys, st) {
				keys = append(keys, st)
			}
		}
		for _, st := range keys {
			h := after[i][st]
			if h == nil {
				continue
			}
			var b *stageHist
			if before[i] != nil {
				b = before[i][st]
			}
			d := h.minus(b)
			if d.count == 0 {
				continue
			}
			us := func(s float64) string { return fmt.Sprintf("%.0fµs", s*1e6) }
			fmt.Fprintf(w, "  %-4s %-14s %9.0f %10s %10s %10s\n", names[i], st, d.count, us(d.sum/d.count), us(d.quantile(0.5)), us(d.quantile(0.99)))
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
