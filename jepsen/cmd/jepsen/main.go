// Command jepsen runs coord's fault-injection test: a cluster of real coord
// processes, concurrent ZooKeeper clients, faults on a seeded schedule, then
// the checkers and a report. See docs/jepsen.md.
//
//	go run ./jepsen/cmd/jepsen -duration 60s -nemeses kill,pause,partition-leader
//
//	go run ./jepsen/cmd/jepsen -differential -ops 5000 -seed 9
//
// It exits 0 when every checker passed, 1 when one failed or could not
// decide, 2 when the run could not be made.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"coord/jepsen"
)

func main() { os.Exit(run()) }

func run() int {
	var cfg jepsen.Config
	flag.IntVar(&cfg.Voters, "nodes", 3, "voting servers (3 or 5)")
	flag.IntVar(&cfg.Observers, "observers", 0, "observers (raft non-voters)")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the clients run")
	flag.Int64Var(&cfg.Seed, "seed", time.Now().UnixNano()%1e6, "seed of the fault schedule and the clients' choices")
	nemeses := flag.String("nemeses", "kill,kill-leader,restart,pause,pause-leader,partition-minority,partition-leader",
		"faults, comma separated (\"\" for none): "+strings.Join(jepsen.NemesisNames(&jepsen.Lab{}), ", "))
	workloads := flag.String("workloads", "register,sessions,sequential,ryw", "workloads, comma separated: gosessions, lock, minority, queue, register, ryw, sequential, sessions, watches")
	flag.IntVar(&cfg.Workers, "workers", 4, "clients per workload (sessions and sequential get half)")
	flag.DurationVar(&cfg.Interval, "interval", 2*time.Second, "quiet time between faults (drawn from [x, 2x))")
	flag.DurationVar(&cfg.Hold, "hold", 2*time.Second, "how long a fault lasts (drawn from [x, 2x))")
	flag.DurationVar(&cfg.OpTimeout, "op-timeout", 3*time.Second, "an operation not answered by then is indeterminate")
	flag.StringVar(&cfg.Net, "net", "auto", "how network nemeses cut links: netns (namespaces and iptables, root), proxy (a fault-injecting TCP proxy per peer link) or auto (netns where possible, else proxy)")
	flag.StringVar(&cfg.Dir, "results", "jepsen-results", "results directory (each run gets a subdirectory)")
	flag.StringVar(&cfg.Bin, "coord-bin", "", "prebuilt coord binary (default: build ./cmd/coord)")
	tags := flag.String("tags", "", "build tags for ./cmd/coord (jepsenplanted: planted bugs, chosen by -planted)")
	serverArgs := flag.String("server-args", "", "more coord flags for every server, space-separated (after the runner's own, so they win)")
	planted := flag.String("planted", "", "planted bug to turn on in the servers (needs -tags jepsenplanted): ackearly, followerread, keepephemerals, reuseorigin, nologsync, snapshotnosync, noverify")
	diff := flag.Bool("differential", false, "instead: one seeded operation stream on coord and on Apache ZooKeeper 3.8, every result compared")
	ops := flag.Int("ops", 2000, "with -differential: operations in the stream")
	zkAddr := flag.String("zookeeper", "", "with -differential: a running ZooKeeper holding only /zookeeper (default: start Debian's)")
	compose := flag.Bool("compose", false, "instead of processes: the docker-compose.yml cluster (3 voters, 1 observer; nemeses "+strings.Join(jepsen.ComposeNemesisNames, ",")+", the default)")
	composeImage := flag.String("compose-image", "", "with -compose: the image to run (default: build one from this checkout)")
	flag.Parse()
	if *compose && !isFlagSet("nemeses") {
		*nemeses = strings.Join(jepsen.ComposeNemesisNames, ",")
	}
	cfg.Nemeses = split(*nemeses)
	cfg.Workloads = split(*workloads)
	cfg.Tags = split(*tags)
	cfg.Args = strings.Fields(*serverArgs)
	if *planted != "" {
		cfg.Env = append(cfg.Env, "COORD_PLANTED="+*planted)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg.Log = log

	// SIGINT and SIGTERM end the run early; it still heals, cleans up and
	// reports.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *diff {
		return differential(ctx, jepsen.DiffConfig{Seed: cfg.Seed, Ops: *ops, Voters: cfg.Voters, Bin: cfg.Bin,
			ZooKeeper: *zkAddr, Dir: cfg.Dir, OpTimeout: 10 * time.Second, Log: log})
	}
	run := jepsen.Run
	if *compose {
		run = func(ctx context.Context, cfg jepsen.Config) (*jepsen.Report, error) {
			return jepsen.RunCompose(ctx, cfg, jepsen.ComposeOptions{Image: *composeImage})
		}
	}
	rep, err := run(ctx, cfg)
	if err != nil {
		log.Error("run failed", "err", err)
		if rep == nil {
			return 2
		}
	}
	for _, v := range rep.Verdicts {
		fmt.Printf("%-12s %-7s %s\n", v.Checker, v.Result, v.Summary)
		for _, d := range v.Details {
			fmt.Printf("    %s\n", d)
		}
	}
	fmt.Printf("report: %s/report.html\n", rep.Dir)
	if !rep.Valid() {
		return 1
	}
	return 0
}

func differential(ctx context.Context, cfg jepsen.DiffConfig) int {
	rep, err := jepsen.Differential(ctx, cfg)
	if err != nil {
		cfg.Log.Error("differential run failed", "err", err)
		if rep == nil {
			return 2
		}
	}
	fmt.Printf("differential, seed %d: %d steps %v, %d watch events, errors both gave %v\n",
		rep.Seed, rep.Steps, rep.Kinds, rep.Events, rep.Errors)
	for _, m := range rep.Mismatches {
		fmt.Printf("MISMATCH at step %d: %s\n  coord:     %s\n  zookeeper: %s\n", m.Step, m.Op, m.Coord, m.ZooKeeper)
	}
	fmt.Printf("report: %s\n", rep.Dir)
	if err != nil || len(rep.Mismatches) > 0 {
		return 1
	}
	return 0
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func isFlagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
