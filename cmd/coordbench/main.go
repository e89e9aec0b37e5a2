// Command coordbench loads a coord cluster, or an Apache ZooKeeper
// ensemble, and reports throughput and latency, watch-delivery latency, and
// how long the cluster takes to accept writes again after its leader is
// killed.
//
//	go run ./cmd/coordbench -local 3 -workloads set -sessions 1,16,64 -inflight 1,8
//	go run ./cmd/coordbench -local 3 -failover -failover-rounds 5
//	go run ./cmd/coordbench -local 1 -protocol zk -flood 2000000
//	go run ./cmd/coordbench -servers 10.0.0.1:2182,10.0.0.2:2182 -workloads all
//	go run ./cmd/coordbench -local 3 -protocol zk -workloads all
//	go run ./cmd/coordbench -zookeeper 3 -workloads all
//	go run ./cmd/coordbench -protocol zk -servers zk1:2181,zk2:2181,zk3:2181 -workloads set,get
//	go run ./cmd/coordbench -local 3 -observers 1 -protocol zk -freshness
//	go run ./cmd/coordbench -zookeeper 3 -observers 1 -freshness
//	go run ./cmd/coordbench -local 3 -protocol zk -scale 100000 -scale-watches 1000000
//
// -protocol grpc (the default) drives coord's Go client (package client);
// -protocol zk drives github.com/go-zookeeper/zk over ZooKeeper's wire
// protocol, so the same workload and the same client can load coord (its
// -zk-addr port) and Apache ZooKeeper alike; -servers then lists
// ZooKeeper-protocol addresses. go-zookeeper pipelines the calls of several
// goroutines on one connection, so -inflight works the same way. Its calls
// take no context: a request still unanswered -op-timeout after a run's
// window is failed by closing its session. Sessions keep their own server
// order (see session.go) rather than go-zookeeper's shuffled one.
//
// With -local N it builds cmd/coord (or takes -coord-bin) and runs N real
// coord processes on loopback, started with the flags `coord local` gives
// its voters (ids s1..sN, -peers, -bootstrap, fresh data directories in a
// temp directory, ports from -base-port, and -zk-addr when the binary has
// it), waits for an elected leader (Admin.Status), and kills them all when
// it ends, also on an error or SIGINT/SIGTERM (and, on Linux, if coordbench
// itself is killed). With -zookeeper N it does the same with an Apache
// ZooKeeper ensemble from Debian's zookeeper package (one JVM per server,
// -Xmx -zk-heap, zoo.cfg as zookeeper.go describes), waiting until one
// server's `srvr` says Mode: leader and the others follow.
//
// Workloads, each run for every -sessions × -inflight pair (or as -runs
// lists them, e.g. -runs set:1x1,set:64x8,watch:16):
//   - create: new znodes, -data-size bytes, 20-byte names spread over
//     -parents parents;
//   - set: setData (any version) on a random one of -keys prepared znodes;
//   - get: getData of a random prepared znode;
//   - mixed: -read-percent get, the rest set;
//   - watch (once per -sessions count, which counts watchers): watch-delivery
//     latency, defined in watch.go and in the report's header.
//
// A session with -inflight k has k requests outstanding: k goroutines each
// call and wait, pipelined on the session's one stream. Session i starts at
// server i mod len(servers). After -warmup, every request that completes
// inside the -duration window counts: ops/s is successful requests over the
// window, and p50/p99/p999 are nearest-rank percentiles of their latencies
// from a log-linear histogram (never below the exact value and less than
// 1/128 above it). errors counts failed requests during the whole run,
// worst-1s is the fewest completed in any one second of the window (a
// stall shows there), disc counts sessions losing their server (and
// expiries), and rss is the largest server's resident memory after the run
// (-local, -zookeeper). -prewarm runs unreported load once before the
// first run, so that a JVM's JIT has compiled the request path.
//
// -flood N (with -local or -zookeeper and -protocol zk) has one session
// pipeline N getData requests without reading the replies and reports how
// many the server took before it stopped reading, and server 1's resident
// memory before and at its peak (flood.go).
//
// -big N (with -local or -zookeeper and -protocol zk) creates N znodes
// with 64 sessions × 8 in flight, reports each server's RSS once all have
// them, then kills a follower with SIGKILL -big-rounds times, starts it at
// once and times the kill to the first getData it answers (restart.go);
// with -big-wipe, once more with the follower's state deleted before the
// start, also timed to its catching up.
//
// -observers N adds N observers after the voters of -local (coord's raft
// non-voters, started as `coord local` starts them) or -zookeeper
// (peerType=observer); sessions spread over them too.
//
// -freshness (ZooKeeper's protocol only) puts a writer session on the
// leader and a reader session on every follower and observer; after each
// of -freshness-writes acknowledged setData calls every reader reads the
// znode until it shows the write. It reports, per server, per role and for
// all, the share of first reads that already showed it and the lag from
// the ack until a read showed it (freshness.go).
//
// -scale N (with -local or -zookeeper and -protocol zk) opens N sessions
// with a light client of its own and measures what many sessions and
// watches cost: connect rate, memory and idle CPU per session, bytes per
// watch, fan-out of one change to N watchers, a connect storm after the
// leader is killed, and half the sessions expiring at once (scale.go).
//
// -snapshot-during (with -local or -zookeeper) reports the snapshots each
// server wrote during each run, and with -local asks every coord server
// for one a second into the measured window (snapshots.go); of several
// runs, the first is a baseline in which it asks for none.
//
// -floor N, after everything else, takes N samples each of a durable
// append and a loopback round trip and prints the least one replicated
// write can take on this machine (floor.go).
//
// -failover (with -local or -zookeeper, at least 3 servers) keeps
// -failover-sessions sessions writing (one setData in flight each),
// SIGKILLs the leader, and reports the time from the kill to a survivor
// reporting itself leader (election: Admin.Status or `srvr`, polled every
// 10 ms), to the first write issued after the kill being acknowledged
// (recovery), and to every writer having had one acknowledged (all-ok), and
// how many writes failed between the kill and recovery. The killed server is
// restarted and caught up before the next round.
//
// Every loop is bounded by time: a run lasts warmup + duration plus at most
// -op-timeout for stragglers, and a failover round at most
// -failover-timeout plus the restart.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-scale-worker" {
		os.Exit(runScaleWorker(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) (code int) {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "coordbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logger := slog.New(slog.DiscardHandler)
	if cfg.verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	var jsonOut io.Writer
	switch cfg.jsonPath {
	case "":
	case "-":
		jsonOut = stdout
	default:
		f, err := os.Create(cfg.jsonPath)
		if err != nil {
			fmt.Fprintln(stderr, "coordbench:", err)
			return 1
		}
		defer f.Close()
		jsonOut = f
	}
	emit := func(v any) {
		if jsonOut == nil {
			return
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(jsonOut, "%s\n", b)
	}
	fail := func(err error) int {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "coordbench: interrupted")
			return 130
		}
		fmt.Fprintln(stderr, "coordbench:", err)
		return 1
	}

	servers := cfg.servers
	var ens ensemble
	var localCluster *cluster // -local: for -stages
	var b *bench
	floorDir := os.TempDir()
	if cfg.local > 0 || cfg.zookeeper > 0 {
		dir, err := os.MkdirTemp("", "coordbench-")
		if err != nil {
			return fail(err)
		}
		floorDir = dir
		keep := cfg.keep
		defer func() {
			if b != nil && b.trouble {
				keep = true // the servers' logs say what happened
			}
			if ens != nil {
				ens.stop()
				if exits := ens.unexpectedExits(); len(exits) > 0 {
					keep = true
					for _, e := range exits {
						fmt.Fprintln(stderr, "coordbench: warning:", e)
					}
					if code == 0 {
						code = 1
					}
				}
			}
			if keep || (code != 0 && code != 130) {
				fmt.Fprintf(stderr, "coordbench: cluster directory (data and server logs) kept in %s\n", dir)
			} else {
				os.RemoveAll(dir)
			}
		}()
		t := time.Now()
		if cfg.local > 0 {
			bin := cfg.coordBin
			if bin == "" {
				fmt.Fprintln(stderr, "# building ./cmd/coord")
				if bin, err = buildCoord(ctx, dir); err != nil {
					return fail(err)
				}
			}
			cl, err := startCluster(ctx, bin, dir, cfg.srvLog, strings.Fields(cfg.srvFlags), cfg.local, cfg.observers, cfg.basePort, stderr)
			if err != nil {
				return fail(err)
			}
			ens = cl
			localCluster = cl
			servers = cl.grpcAddrs()
			if cfg.protocol == "zk" {
				if servers = cl.zkAddrs(); servers == nil {
					return fail(fmt.Errorf("-protocol zk: %s has no -zk-addr flag", bin))
				}
			}
		} else {
			jvm := append([]string{"-Xmx" + cfg.zkHeap}, strings.Fields(cfg.zkJVMFlags)...)
			z, err := startZooKeeper(ctx, cfg.zkJava, cfg.zkClasspath, jvm, dir, cfg.srvLog, cfg.zookeeper, cfg.observers, cfg.basePort, stderr)
			if err != nil {
				return fail(err)
			}
			ens = z
			servers = z.clientAddrs()
		}
		leader, err := ens.waitLeader(ctx, 30*time.Second, 0)
		if err != nil {
			return fail(err)
		}
		kind := "coord servers"
		if cfg.zookeeper > 0 {
			kind = "Apache ZooKeeper servers"
		}
		fmt.Fprintf(stdout, "# %d %s up in %v, leader %s (%s); a session's first server is the list's i-th mod %d; logs in %s\n",
			ens.size(), kind, time.Since(t).Round(time.Millisecond), ens.name(leader), servers[leader-1], len(servers), dir)
		switch cfg.sessionOn {
		case "leader":
			servers = rotate(servers, leader-1)
		case "follower": // the voter after the leader
			servers = rotate(servers, leader%(cfg.local+cfg.zookeeper))
		}
	}
	fmt.Fprintf(stdout, "# coordbench %s: protocol %s, servers %v, GOMAXPROCS %d, %d CPUs, data %d B, %d parents, %d keys, warmup %v, duration %v\n",
		time.Now().Format(time.RFC3339), cfg.protocol, servers, runtime.GOMAXPROCS(0), runtime.NumCPU(), cfg.dataSize, cfg.parents, cfg.keys, cfg.warmup, cfg.duration)

	b = newBench(cfg, servers, ens, logger)
	if err := b.prepare(ctx, stdout); err != nil {
		return fail(err)
	}
	if cfg.prewarm > 0 {
		if err := b.prewarm(ctx, stdout); err != nil {
			return fail(err)
		}
	}
	checkExits := func() error {
		if ens != nil {
			if exits := ens.unexpectedExits(); len(exits) > 0 {
				return fmt.Errorf("server exited during the run: %v", exits)
			}
		}
		return nil
	}
	// -big goes first, so runs given with it (-runs or -workloads) measure
	// against the big tree.
	if cfg.big > 0 {
		res, err := b.runBig(ctx, stdout, cfg.big, cfg.bigRounds)
		emit(struct {
			Type string `json:"type"`
			bigResult
		}{"big", res})
		if err != nil {
			return fail(fmt.Errorf("big: %w", err))
		}
	}
	if cfg.scale > 0 {
		res, err := b.runScale(ctx, stdout, cfg.scale, cfg.scaleWatches, cfg.scaleTimeout, cfg.scaleCPUWindow, cfg.scalePhases)
		if err == nil {
			printScale(stdout, res)
		}
		emit(struct {
			Type string `json:"type"`
			scaleResult
		}{"scale", res})
		if err != nil {
			return fail(fmt.Errorf("scale: %w", err))
		}
		if err := checkExits(); err != nil {
			return fail(err)
		}
	}
	header := ""
	for runIdx, r := range cfg.runs {
		if r.workload == "watch" {
			if header != "watch" {
				printWatchHeader(stdout)
				header = "watch"
			}
			res, err := b.runWatch(ctx, r.sessions)
			if err != nil {
				return fail(fmt.Errorf("watch with %d watchers: %w", r.sessions, err))
			}
			printWatch(stdout, res)
			emit(struct {
				Type string `json:"type"`
				watchResult
			}{"watch", res})
		} else {
			if header != "run" {
				printRunHeader(stdout)
				header = "run"
			}
			var stageAddrs []string
			switch {
			case cfg.stages == "local" && localCluster != nil:
				for i := 1; i <= localCluster.size(); i++ {
					stageAddrs = append(stageAddrs, localCluster.httpAddr(i))
				}
			case cfg.stages != "" && cfg.stages != "local":
				stageAddrs = strings.Split(cfg.stages, ",")
			}
			scrape := func() []stageScrape {
				out := make([]stageScrape, len(stageAddrs))
				for i, a := range stageAddrs {
					sc, err := scrapeStages(a)
					if err != nil {
						fmt.Fprintf(stderr, "coordbench: -stages: %s: %v\n", a, err)
					}
					out[i] = sc
				}
				return out
			}
			before := scrape()
			var snaps *snapshotWatch
			if cfg.snapshotDuring {
				// With several runs the first is the baseline: no snapshot asked for.
				ask := localCluster != nil && (runIdx > 0 || len(cfg.runs) == 1)
				snaps = watchSnapshots(ctx, ens, ask, cfg.warmup+time.Second)
			}
			res, err := b.runOne(ctx, r.workload, r.sessions, r.inflight)
			if err != nil {
				return fail(fmt.Errorf("%s with %d sessions × %d: %w", r.workload, r.sessions, r.inflight, err))
			}
			printRun(stdout, res)
			if snaps != nil {
				snaps.report(ctx, stdout)
			}
			if len(stageAddrs) > 0 {
				names := make([]string, len(stageAddrs))
				for i := range names {
					names[i] = fmt.Sprintf("s%d", i+1)
				}
				printStages(stdout, names, before, scrape())
			}
			emit(struct {
				Type string `json:"type"`
				runResult
			}{"run", res})
		}
		if err := checkExits(); err != nil {
			return fail(err)
		}
	}
	if cfg.freshness {
		res, err := b.runFreshness(ctx)
		if err != nil {
			return fail(fmt.Errorf("freshness: %w", err))
		}
		printFreshness(stdout, res)
		emit(struct {
			Type string `json:"type"`
			freshnessResult
		}{"freshness", res})
		if err := checkExits(); err != nil {
			return fail(err)
		}
	}
	if cfg.flood > 0 {
		res, err := b.runFlood(ctx, cfg.flood, cfg.floodStall)
		if err != nil {
			return fail(fmt.Errorf("flood: %w", err))
		}
		printFlood(stdout, ens.name(1), res)
		emit(struct {
			Type string `json:"type"`
			floodResult
		}{"flood", res})
	}
	if cfg.failover {
		fmt.Fprintf(stdout, "# failover: %d sessions writing, SIGKILL of the leader, %d rounds\n", cfg.failoverSessions, cfg.failoverRounds)
		rounds, err := b.runFailover(ctx, stdout, emit)
		if len(rounds) > 0 {
			printFailoverSummary(stdout, rounds)
		}
		if err != nil {
			return fail(err)
		}
	}
	if cfg.floor > 0 {
		res, err := measureFloor(floorDir, cfg.floor)
		if err != nil {
			return fail(err)
		}
		printFloor(stdout, res)
		emit(struct {
			Type string `json:"type"`
			floorResult
		}{"floor", res})
	}
	return 0
}
