package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The text report: one aligned row per run, printed as each run ends, with
// error details and server warnings on indented lines below it.

const runHeader = "%-8s %5s %5s %10s %9s %9s %9s %9s %8s %9s %5s %8s\n"

func printRunHeader(w io.Writer) {
	fmt.Fprintf(w, runHeader, "workload", "sess", "infl", "ops/s", "p50(ms)", "p99(ms)", "p999(ms)", "max(ms)",
		"errors", "worst-1s", "disc", "rss(MB)")
}

// ms formats a duration in milliseconds with microsecond resolution.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

func printRun(w io.Writer, r runResult) {
	var rss int64
	for _, h := range r.Health {
		rss = max(rss, h.RSS)
	}
	rssCol := "-"
	if rss > 0 {
		rssCol = fmt.Sprintf("%d", rss>>20)
	}
	fmt.Fprintf(w, runHeader, r.Workload, fmt.Sprint(r.Sessions), fmt.Sprint(r.Inflight), fmt.Sprintf("%.0f", r.OpsPerSec),
		ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Max), fmt.Sprint(r.Errors), fmt.Sprint(r.WorstSecond),
		fmt.Sprint(r.Disconnects), rssCol)
	for _, k := range sortedKinds(r.ErrorKinds) {
		fmt.Fprintf(w, "    error: %d × %s\n", r.ErrorKinds[k], k)
	}
	if r.Stuck > 0 {
		fmt.Fprintf(w, "    warning: %d requests still unanswered op-timeout after the run ended\n", r.Stuck)
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

func printRound(w io.Writer, fr failoverRound) {
	leader := fr.NewLeader
	if leader == "" {
		leader = "-"
	}
	var kinds []string
	for _, k := range sortedKinds(fr.ErrorKinds) {
		kinds = append(kinds, fmt.Sprintf("%d×%s", fr.ErrorKinds[k], k))
	}
	if fr.Err != "" {
		kinds = append(kinds, "FAILED: "+fr.Err)
	}
	fmt.Fprintf(w, "%-5d %-6s %-6s %9.0f %12s %12s %12s %7d %5d  %s\n", fr.Round, fr.Killed, leader, fr.Before,
		ms(fr.Election), ms(fr.Recovery), ms(fr.AllWriters), fr.Failed, fr.Disconnect, strings.Join(kinds, ", "))
}

func printFailoverSummary(w io.Writer, rounds []failoverRound) {
	var el, rec, all []time.Duration
	for _, r := range rounds {
		el, rec, all = append(el, r.Election), append(rec, r.Recovery), append(all, r.AllWriters)
	}
	fmt.Fprintf(w, "%-5s %-6s %-6s %9s %12s %12s %12s\n", "median", "", "", "", ms(median(el)), ms(median(rec)), ms(median(all)))
}
